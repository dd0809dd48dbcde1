//! Writes what the operators' page needs to know about the state machines, from the core
//! itself: the known event types (the archive's type filter) and each resource kind's states
//! (the manual transition's targets). scripts/build.sh runs it before every worker build:
//!
//!     cargo run -q -p paymos-core --example machine_json -- public/admin/machine.json
//!
//! Without an argument it prints the JSON to stdout.

use paymos_core::machine::{known_event_types, states};
use paymos_core::ResourceKind;
use serde_json::{json, Map, Value};

fn main() {
    let mut by_kind = Map::new();
    for kind in ResourceKind::ALL {
        let names: Vec<String> = states(kind).iter().map(|s| s.to_string()).collect();
        by_kind.insert(kind.as_str().to_string(), json!(names));
    }
    let doc = json!({
        "generated_by": "cargo run -p paymos-core --example machine_json",
        "event_types": known_event_types().collect::<Vec<_>>(),
        "states": Value::Object(by_kind),
    });
    let text = serde_json::to_string_pretty(&doc).expect("JSON") + "\n";
    match std::env::args_os().nth(1) {
        Some(path) => {
            // unchanged content keeps the file's mtime (wrangler dev watches public/)
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                std::fs::write(&path, text).unwrap_or_else(|e| {
                    eprintln!("machine_json: cannot write {}: {e}", path.to_string_lossy());
                    std::process::exit(1);
                });
            }
        }
        None => print!("{text}"),
    }
}
