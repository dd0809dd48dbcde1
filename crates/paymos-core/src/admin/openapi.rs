//! The admin API described as OpenAPI 3.1 (interface §12): `openapi.json` beside this file,
//! served as it is by `GET /admin/api/openapi.json`. It is kept next to the route table it
//! describes, and the tests below hold the two together: the document's operations are
//! exactly [`super::ROUTES`] (method, path, operationId, path parameters, request body), every
//! route documents the refusals it can give, and every 400 code the command parser can
//! answer is in its operation's list. A new endpoint, error code, audit action or outcome
//! without its description fails here.
//!
//! Outside this crate the document is checked by tools no one here wrote:
//! `openapi-spec-validator` (tests/openapi.test.mjs), and Schemathesis run against the live
//! local admin API from it (same file).

/// The document, as served.
pub const DOCUMENT: &str = include_str!("openapi.json");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::AccessError;
    use crate::admin::audit::{Action, Outcome};
    use crate::admin::{Command, CommandError, Method, RequestBody, ROUTES};
    use serde_json::Value;
    use std::collections::{BTreeSet, HashMap};

    fn doc() -> Value {
        serde_json::from_str(DOCUMENT).expect("openapi.json is JSON")
    }

    /// Follows a local `$ref` (`#/components/...`).
    fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let pointer = r.strip_prefix('#').expect("a local $ref");
                resolve(doc, doc.pointer(pointer).unwrap_or_else(|| panic!("{r}")))
            }
            None => v,
        }
    }

    fn method_key(m: Method) -> &'static str {
        match m {
            Method::Get => "get",
            Method::Post => "post",
        }
    }

    fn operation<'a>(doc: &'a Value, m: Method, path: &str) -> &'a Value {
        &doc["paths"][path][method_key(m)]
    }

    /// The `error` codes a response lists (`enum` or `const`, through `allOf`/`$ref`).
    fn codes(doc: &Value, response: &Value) -> BTreeSet<String> {
        let response = resolve(doc, response);
        let schema = resolve(doc, &response["content"]["application/json"]["schema"]);
        let error = &schema["properties"]["error"];
        let mut out = BTreeSet::new();
        if let Some(c) = error.get("const").and_then(Value::as_str) {
            out.insert(c.to_string());
        }
        for c in error["enum"].as_array().into_iter().flatten() {
            out.insert(c.as_str().unwrap().to_string());
        }
        out
    }

    fn strings(v: &Value) -> Vec<String> {
        v.as_array()
            .unwrap_or_else(|| panic!("not an array: {v}"))
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn it_is_openapi_3_1_with_both_security_schemes() {
        let d = doc();
        assert_eq!(d["openapi"], "3.1.0");
        assert_eq!(d["servers"][0]["url"], "/admin/api");
        let schemes = &d["components"]["securitySchemes"];
        assert_eq!(schemes["bearer"]["type"], "http");
        assert_eq!(schemes["bearer"]["scheme"], "bearer");
        assert_eq!(schemes["accessHeader"]["type"], "apiKey");
        assert_eq!(schemes["accessHeader"]["in"], "header");
        assert_eq!(
            schemes["accessHeader"]["name"],
            crate::access::HEADER_NAME,
            "the header the Worker reads"
        );
        assert_eq!(schemes["accessCookie"]["in"], "cookie");
        assert_eq!(schemes["accessCookie"]["name"], crate::access::COOKIE_NAME);
        let alternatives: BTreeSet<String> = d["security"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s.as_object().unwrap().keys().cloned())
            .collect();
        assert_eq!(
            alternatives,
            ["accessCookie", "accessHeader", "bearer"]
                .map(String::from)
                .into()
        );
    }

    /// The document's operations are the route table's, no more and no fewer.
    #[test]
    fn its_operations_are_exactly_the_routes() {
        let d = doc();
        let mut documented = BTreeSet::new();
        for (path, item) in d["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                documented.insert((
                    method.to_uppercase(),
                    path.clone(),
                    op["operationId"].as_str().unwrap().to_string(),
                ));
            }
        }
        let routed: BTreeSet<_> = ROUTES
            .iter()
            .map(|r| {
                (
                    r.method.as_str().to_string(),
                    r.path.to_string(),
                    r.operation_id.to_string(),
                )
            })
            .collect();
        assert_eq!(documented, routed);
    }

    #[test]
    fn each_operation_declares_its_path_parameters_and_body_as_routed() {
        let d = doc();
        for r in ROUTES {
            let op = operation(&d, r.method, r.path);
            let template: Vec<&str> = r
                .path
                .split('/')
                .filter(|s| s.starts_with('{'))
                .map(|s| s.trim_matches(|c| c == '{' || c == '}'))
                .collect();
            let declared: Vec<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .map(|p| {
                    assert_eq!(p["required"], true, "{}", r.path);
                    p["name"].as_str().unwrap()
                })
                .collect();
            assert_eq!(declared, template, "{}", r.path);
            let body = op.get("requestBody");
            match r.body {
                RequestBody::None => assert!(body.is_none(), "{}: a body it never reads", r.path),
                RequestBody::Optional => assert_eq!(body.unwrap()["required"], false, "{}", r.path),
                RequestBody::Required => assert_eq!(body.unwrap()["required"], true, "{}", r.path),
            }
            assert!(op["summary"].is_string(), "{}", r.path);
        }
    }

    /// Every operation documents 401 and 503 with their codes; every write 403; every one
    /// that names an item 404; every one that answers JSON, its content type.
    #[test]
    fn each_operation_documents_its_refusals() {
        let d = doc();
        // every Access failure is 401, the team's keys that cannot be read included (§11)
        let mut unauthorized: BTreeSet<String> =
            AccessError::CODES.iter().map(|c| c.to_string()).collect();
        unauthorized.insert("unauthorized".into());
        for r in ROUTES {
            let responses = &operation(&d, r.method, r.path)["responses"];
            assert_eq!(codes(&d, &responses["401"]), unauthorized, "{}", r.path);
            let unavailable = codes(&d, &responses["503"]);
            assert!(unavailable.contains("database_unavailable"), "{}", r.path);
            assert!(
                !unavailable.contains("access_keys_unavailable"),
                "{}: a 401, not a 503",
                r.path
            );
            assert_eq!(
                codes(&d, &responses["404"]),
                ["not_found".to_string()].into(),
                "{}",
                r.path
            );
            if r.method == Method::Post {
                assert_eq!(
                    codes(&d, &responses["403"]),
                    ["cross_site_request".to_string()].into(),
                    "{}",
                    r.path
                );
            }
            let success: Vec<&String> = responses
                .as_object()
                .unwrap()
                .keys()
                .filter(|s| s.starts_with('2'))
                .collect();
            assert_eq!(success.len(), 1, "{}: one success status", r.path);
            for (status, response) in responses.as_object().unwrap() {
                let response = resolve(&d, response);
                assert!(response["description"].is_string(), "{} {status}", r.path);
                assert!(
                    response["content"]["application/json"]["schema"].is_object(),
                    "{} {status}: JSON",
                    r.path
                );
            }
        }
    }

    /// Bad requests of each operation, each answered with a code its 400 lists.
    #[test]
    fn every_400_the_parser_gives_is_in_its_operations_list() {
        let d = doc();
        let cases: &[(&str, &str, &str, &str)] = &[
            ("GET", "deliveries", "limit=0", ""),
            ("GET", "deliveries", "cursor=x", ""),
            ("GET", "deliveries", "status=nope", ""),
            ("POST", "deliveries/replay", "", "[]"),
            ("POST", "deliveries/replay", "", "{}"),
            ("POST", "deliveries/replay", "", r#"{"status":"x"}"#),
            ("POST", "deliveries/replay", "", r#"{"received_after":"x"}"#),
            (
                "POST",
                "deliveries/replay",
                "",
                r#"{"type":"a","cursor":"x"}"#,
            ),
            ("POST", "deliveries/replay", "", r#"{"type":"a","extra":1}"#),
            ("POST", "resources/x/transition", "", "{}"),
            ("POST", "resources/inv_1/transition", "", "{}"),
            (
                "POST",
                "resources/inv_1/transition",
                "",
                r#"{"to":"paid","reason":""}"#,
            ),
            (
                "POST",
                "resources/inv_1/transition",
                "",
                r#"{"to":"paid","reason":"r","order_ref":"a\u0001"}"#,
            ),
            (
                "POST",
                "resources/inv_1/transition",
                "",
                r#"{"to":"x","reason":"r"}"#,
            ),
            ("POST", "reconcile", "", "[1]"),
            ("GET", "effects", "kind=x", ""),
            ("GET", "effects", "dispatch=x", ""),
            ("GET", "effects", "dismissed=false", ""),
            ("GET", "effects", "cursor=-1", ""),
            ("GET", "effects", "limit=x", ""),
            ("GET", "audit", "action=x", ""),
            ("GET", "audit", "actor=a%01", ""),
            ("GET", "audit", "cursor=x", ""),
            ("GET", "audit", "limit=1001", ""),
            ("POST", "archive", "", "{}"),
            ("POST", "archive", "", r#"{"before":"yesterday"}"#),
            (
                "POST",
                "archive",
                "",
                r#"{"before":"2026-01-01","cursor":"x"}"#,
            ),
            ("POST", "deliveries/evt_1/dismiss", "", "[]"),
            ("POST", "deliveries/evt_1/dismiss", "", r#"{"reason":" "}"#),
            ("POST", "effects/eff_1/dismiss", "", r#"{"why":"x"}"#),
            ("POST", "effects/eff_1/dismiss", "", r#"{"reason":""}"#),
            ("GET", "metrics/history", "hours=0", ""),
        ];
        let mut seen = BTreeSet::new();
        for (method, path, query, body) in cases {
            let resolved = crate::admin::routes::resolve(method, path).unwrap();
            let err = Command::from_resolved(&resolved, query, body.as_bytes()).unwrap_err();
            let CommandError::BadRequest { code, .. } = err else {
                panic!("{method} {path}: {err:?}")
            };
            let route = resolved.route;
            let listed = codes(
                &d,
                &operation(&d, route.method, route.path)["responses"]["400"],
            );
            assert!(
                listed.contains(code),
                "{method} {path}: {code} not in {listed:?}"
            );
            seen.insert(code);
        }
        // and these cases reach every code the parser has (a new code needs a case here)
        let source = [
            include_str!("command.rs"),
            include_str!("paging.rs"),
            include_str!("routes.rs"),
        ]
        .concat();
        let mut in_source = BTreeSet::new();
        for part in source.split("bad_request(").skip(1) {
            let literal = part.trim_start().strip_prefix('"');
            if let Some(rest) = literal {
                in_source.insert(rest.split('"').next().unwrap());
            }
        }
        in_source.remove("code"); // the helper's own signature
        assert!(in_source.len() >= 10, "{in_source:?}");
        assert_eq!(seen, in_source, "every 400 code of the parser, with a case");
        // a route that reads no body and takes no query refuses nothing with 400
        for r in ROUTES {
            let has_400 = operation(&d, r.method, r.path)["responses"]
                .get("400")
                .is_some();
            let documented: Vec<&str> = cases
                .iter()
                .filter_map(|(m, p, _, _)| {
                    let resolved = crate::admin::routes::resolve(m, p).ok()?;
                    (resolved.route == r).then_some(*p)
                })
                .collect();
            assert_eq!(has_400, !documented.is_empty(), "{}", r.path);
        }
    }

    /// A replay that reads an archived body back (src/archive.rs) can fail on the archive:
    /// 502 `archive_failed`, and a single replay 409 `archive_busy` when the delivery was
    /// archived again meanwhile.
    #[test]
    fn the_replays_document_the_archives_refusals() {
        let d = doc();
        for path in ["/deliveries/{event_id}/replay", "/deliveries/replay"] {
            let responses = &operation(&d, Method::Post, path)["responses"];
            assert_eq!(
                codes(&d, &responses["502"]),
                ["archive_failed".to_string()].into(),
                "{path}"
            );
        }
        let single = &operation(&d, Method::Post, "/deliveries/{event_id}/replay")["responses"];
        assert_eq!(
            codes(&d, &single["409"]),
            ["archive_busy".to_string()].into()
        );
    }

    #[test]
    fn the_audit_words_are_the_cores() {
        let d = doc();
        let entry = &d["components"]["schemas"]["AuditEntry"]["properties"];
        let actions: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
        let outcomes: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(strings(&entry["action"]["enum"]), actions);
        assert_eq!(strings(&entry["outcome"]["enum"]), outcomes);
        let op = operation(&d, Method::Get, "/audit");
        let filter: HashMap<&str, &Value> = op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["name"].as_str().unwrap(), &p["schema"]))
            .collect();
        // an empty filter filters nothing, as on the other lists
        let mut filtered = vec![""];
        filtered.extend(&actions);
        assert_eq!(strings(&filter["action"]["enum"]), filtered);
        // and the operation's description names every one, as recorded
        let described = op["description"].as_str().unwrap();
        for a in &actions {
            assert!(described.contains(&format!("`{a}`")), "/audit: {a}");
        }
        assert_eq!(
            filter["actor"]["maxLength"],
            crate::admin::audit::MAX_ACTOR_CHARS
        );
    }

    /// The transition's `to` is every state of some kind, in the core's words, and its
    /// resource id has the core's pattern.
    #[test]
    fn the_transition_documents_the_cores_states_and_ids() {
        use crate::ids::ResourceKind;
        use crate::machine::states;
        let d = doc();
        let op = operation(&d, Method::Post, "/resources/{resource_id}/transition");
        let to = &op["requestBody"]["content"]["application/json"]["schema"]["properties"]["to"];
        let documented: BTreeSet<String> = strings(&to["enum"]).into_iter().collect();
        let core: BTreeSet<String> = ResourceKind::ALL
            .iter()
            .flat_map(|k| states(*k).iter().map(|s| s.as_str().to_string()))
            .collect();
        assert_eq!(documented, core);
        let pattern = op["parameters"][0]["schema"]["pattern"].as_str().unwrap();
        assert_eq!(pattern, "^(inv|wdr|pcd)_[A-Za-z0-9]{1,64}$");
        // (tests/openapi.test.mjs checks the pattern against the API's answers on its edges)
    }

    #[test]
    fn every_local_reference_resolves() {
        let d = doc();
        fn walk(d: &Value, v: &Value, n: &mut usize) {
            match v {
                Value::Object(m) => {
                    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                        let p = r.strip_prefix('#').expect("local");
                        assert!(d.pointer(p).is_some(), "{r}");
                        *n += 1;
                    }
                    m.values().for_each(|x| walk(d, x, n));
                }
                Value::Array(a) => a.iter().for_each(|x| walk(d, x, n)),
                _ => {}
            }
        }
        let mut n = 0;
        walk(&d, &d, &mut n);
        assert!(n > 50, "{n}");
    }
}
