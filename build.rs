// The build's commit, shown by /healthz.
fn main() {
    println!("cargo:rerun-if-env-changed=PAYMOS_BUILD_COMMIT");
}
