//! The admin API's endpoints as data: the single list of them. The router resolves every
//! request through [`ROUTES`] (which endpoint, or 404, or 405 and its `Allow`), and the
//! OpenAPI document beside it (`openapi.json`, see [`super::openapi`]) is checked against it:
//! each route's path is written as an OpenAPI path template, relative to `/admin/api`.

use super::{CommandError, Method};

/// Defines [`Operation`] and [`Operation::ALL`] from one list, so that neither can miss a
/// variant the other has.
macro_rules! operations {
    ($($(#[$doc:meta])* $variant:ident,)*) => {
        /// What an admin call does: one per [`super::Command`] variant, of the same name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Operation {
            $($(#[$doc])* $variant,)*
        }

        impl Operation {
            pub const ALL: &'static [Operation] = &[$(Operation::$variant,)*];
        }
    };
}

operations! {
    ListDeliveries,
    GetDelivery,
    ReplayDelivery,
    DismissDelivery,
    BulkReplay,
    GetResource,
    Transition,
    ReconcileNow,
    LatestReconcile,
    ListEffects,
    RedeliverEffect,
    AckEffect,
    DismissEffect,
    Metrics,
    MetricsHistory,
    ListAlerts,
    AckAlert,
    /// Who the admission says is asking (interface §11).
    WhoAmI,
    /// The audit log (interface §11).
    ListAudit,
    /// This API's OpenAPI document (interface §12).
    OpenApi,
    Archive,
}

/// Whether a route reads a JSON request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBody {
    /// The body is not read.
    None,
    /// An empty body (or only blanks) reads as `{}`.
    Optional,
    Required,
}

/// One endpoint.
#[derive(Debug, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    /// Relative to `/admin/api`, as an OpenAPI path writes it: `/deliveries/{event_id}/replay`.
    pub path: &'static str,
    /// The OpenAPI `operationId`.
    pub operation_id: &'static str,
    pub operation: Operation,
    pub body: RequestBody,
}

const fn route(
    method: Method,
    path: &'static str,
    operation_id: &'static str,
    operation: Operation,
    body: RequestBody,
) -> Route {
    Route {
        method,
        path,
        operation_id,
        operation,
        body,
    }
}

use Method::{Get, Post};
use RequestBody as B;

/// Every admin endpoint. Where two templates match the same path (`/deliveries/replay` is
/// also `/deliveries/{event_id}`), the concrete one is the path's: see [`resolve`].
pub const ROUTES: &[Route] = &[
    route(
        Get,
        "/deliveries",
        "listDeliveries",
        Operation::ListDeliveries,
        B::None,
    ),
    route(
        Get,
        "/deliveries/{event_id}",
        "getDelivery",
        Operation::GetDelivery,
        B::None,
    ),
    route(
        Post,
        "/deliveries/{event_id}/replay",
        "replayDelivery",
        Operation::ReplayDelivery,
        B::None,
    ),
    route(
        Post,
        "/deliveries/{event_id}/dismiss",
        "dismissDelivery",
        Operation::DismissDelivery,
        B::Required,
    ),
    route(
        Post,
        "/deliveries/replay",
        "bulkReplay",
        Operation::BulkReplay,
        B::Optional,
    ),
    route(
        Get,
        "/resources/{resource_id}",
        "getResource",
        Operation::GetResource,
        B::None,
    ),
    route(
        Post,
        "/resources/{resource_id}/transition",
        "transitionResource",
        Operation::Transition,
        B::Required,
    ),
    route(
        Get,
        "/reconcile",
        "latestReconciliation",
        Operation::LatestReconcile,
        B::None,
    ),
    route(
        Post,
        "/reconcile",
        "reconcileNow",
        Operation::ReconcileNow,
        B::Optional,
    ),
    route(
        Get,
        "/effects",
        "listEffects",
        Operation::ListEffects,
        B::None,
    ),
    route(
        Post,
        "/effects/{effect_id}/redeliver",
        "redeliverEffect",
        Operation::RedeliverEffect,
        B::None,
    ),
    route(
        Post,
        "/effects/{effect_id}/ack",
        "ackEffect",
        Operation::AckEffect,
        B::None,
    ),
    route(
        Post,
        "/effects/{effect_id}/dismiss",
        "dismissEffect",
        Operation::DismissEffect,
        B::Required,
    ),
    route(Get, "/metrics", "getMetrics", Operation::Metrics, B::None),
    route(
        Get,
        "/metrics/history",
        "getMetricsHistory",
        Operation::MetricsHistory,
        B::None,
    ),
    route(Get, "/alerts", "listAlerts", Operation::ListAlerts, B::None),
    route(
        Post,
        "/alerts/{alert_id}/ack",
        "ackAlert",
        Operation::AckAlert,
        B::None,
    ),
    route(Get, "/whoami", "whoAmI", Operation::WhoAmI, B::None),
    route(Get, "/audit", "listAudit", Operation::ListAudit, B::None),
    route(
        Get,
        "/openapi.json",
        "getOpenApi",
        Operation::OpenApi,
        B::None,
    ),
    route(
        Post,
        "/archive",
        "archiveNow",
        Operation::Archive,
        B::Required,
    ),
];

impl Route {
    /// The route for `operation` (every operation has exactly one: see the tests).
    pub fn of(operation: Operation) -> &'static Route {
        ROUTES
            .iter()
            .find(|r| r.operation == operation)
            .expect("every operation has a route")
    }

    /// The path's segments, a `{name}` standing for any one segment.
    fn template(&self) -> impl Iterator<Item = &'static str> {
        self.path.split('/').filter(|s| !s.is_empty())
    }

    /// The values of the template's `{parameters}` if `segments` is this route's path.
    fn matches<'a>(&self, segments: &[&'a str]) -> Option<Vec<&'a str>> {
        let mut params = Vec::new();
        let mut template = self.template();
        for segment in segments {
            let t = template.next()?;
            if t.starts_with('{') && t.ends_with('}') {
                params.push(*segment);
            } else if t != *segment {
                return None;
            }
        }
        template.next().is_none().then_some(params)
    }
}

/// A request's route, and the values of its path parameters in the template's order.
#[derive(Debug, PartialEq, Eq)]
pub struct Resolved<'a> {
    pub route: &'static Route,
    pub params: Vec<&'a str>,
}

impl<'a> Resolved<'a> {
    /// The path's one parameter (every route here has at most one); `""` if none.
    pub fn id(&self) -> &'a str {
        self.params.first().copied().unwrap_or("")
    }
}

/// A path's segments: empty ones (a trailing slash, a doubled one) are not segments.
pub fn segments(path: &str) -> Vec<&str> {
    path.trim_end_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect()
}

/// The route of `method` on `path` (after `/admin/api`, not percent-decoded), matched as
/// OpenAPI matches paths (the document, `openapi.json`, is this table): a concrete template
/// before a templated one, so of the templates that match the path only those with the
/// fewest parameters count (`/deliveries/replay` is the bulk replay's path, never the
/// delivery `{event_id}` "replay": another method on it is 405 `Allow: POST`). Of their
/// routes, the one of `method`; none: 405 with all their methods (RFC 9110 §15.5.6); no
/// template matches: 404. `method` is the request's method token as sent; one the API does
/// not know is never allowed.
///
/// (Until Schemathesis' allow_header_conformance check found it, the first matching template
/// decided alone, and `GET /deliveries/replay` read the delivery "replay", a 404.)
pub fn resolve<'a>(method: &str, path: &'a str) -> Result<Resolved<'a>, CommandError> {
    let segments = segments(path);
    let method = Method::from_token(method);
    let matching: Vec<(&'static Route, Vec<&'a str>)> = ROUTES
        .iter()
        .filter_map(|r| r.matches(&segments).map(|params| (r, params)))
        .collect();
    let fewest = matching.iter().map(|(_, p)| p.len()).min();
    let concrete = matching
        .into_iter()
        .filter(|(_, p)| Some(p.len()) == fewest);
    let (mut get, mut post) = (false, false);
    for (route, params) in concrete {
        if Some(route.method) == method {
            return Ok(Resolved { route, params });
        }
        match route.method {
            Get => get = true,
            Post => post = true,
        }
    }
    Err(match (get, post) {
        (false, false) => CommandError::NotFound,
        (true, true) => CommandError::MethodNotAllowed { allow: "GET, POST" },
        (false, true) => CommandError::MethodNotAllowed { allow: "POST" },
        (true, false) => CommandError::MethodNotAllowed { allow: "GET" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_operation_has_exactly_one_route() {
        for op in Operation::ALL {
            let n = ROUTES.iter().filter(|r| r.operation == *op).count();
            assert_eq!(n, 1, "{op:?} has {n} routes");
        }
        assert_eq!(ROUTES.len(), Operation::ALL.len());
        let ids: HashSet<_> = ROUTES.iter().map(|r| r.operation_id).collect();
        assert_eq!(ids.len(), ROUTES.len(), "operation ids are unique");
        let endpoints: HashSet<_> = ROUTES.iter().map(|r| (r.method, r.path)).collect();
        assert_eq!(
            endpoints.len(),
            ROUTES.len(),
            "one route per method and path"
        );
    }

    #[test]
    fn templates_are_openapi_paths() {
        for r in ROUTES {
            assert!(
                r.path.starts_with('/') && !r.path.ends_with('/'),
                "{}",
                r.path
            );
            for s in r.template() {
                let param = s.starts_with('{') || s.ends_with('}');
                let name = s.trim_start_matches('{').trim_end_matches('}');
                assert!(!param || (s.starts_with('{') && s.ends_with('}')), "{s}");
                // a literal segment may also hold a dot (`openapi.json`), a parameter not
                let dot = |b: u8| b == b'.' && !param;
                assert!(
                    !name.is_empty()
                        && name
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b == b'_' || dot(b)),
                    "{s}"
                );
            }
            assert!(r.operation_id.bytes().all(|b| b.is_ascii_alphabetic()));
        }
    }

    /// Every answer the router gives, method by path, as the admin API answered before the
    /// route table (but for other methods on `/deliveries/replay`: see [`resolve`]):
    /// `Ok(operation)`, 404, or 405 and its Allow.
    #[test]
    fn resolves_as_before() {
        use Operation as O;
        let ok = |m: &str, p: &str| resolve(m, p).map(|r| r.route.operation);
        let not_allowed = |allow| Err(CommandError::MethodNotAllowed { allow });
        let cases: &[(&str, &str, Result<Operation, CommandError>)] = &[
            ("GET", "deliveries", Ok(O::ListDeliveries)),
            ("GET", "deliveries/", Ok(O::ListDeliveries)),
            ("GET", "deliveries//", Ok(O::ListDeliveries)),
            ("GET", "deliveries/evt_1", Ok(O::GetDelivery)),
            ("GET", "deliveries//evt_1/", Ok(O::GetDelivery)),
            ("GET", "deliveries/replay", not_allowed("POST")),
            ("POST", "deliveries/evt_1/replay", Ok(O::ReplayDelivery)),
            ("POST", "deliveries/replay/replay", Ok(O::ReplayDelivery)),
            ("POST", "deliveries/replay", Ok(O::BulkReplay)),
            ("POST", "deliveries/replay/", Ok(O::BulkReplay)),
            ("GET", "resources/inv_1", Ok(O::GetResource)),
            ("POST", "resources/inv_1/transition", Ok(O::Transition)),
            ("POST", "reconcile", Ok(O::ReconcileNow)),
            ("GET", "reconcile", Ok(O::LatestReconcile)),
            ("GET", "effects", Ok(O::ListEffects)),
            ("POST", "effects/eff_1/redeliver", Ok(O::RedeliverEffect)),
            ("POST", "effects/eff_1/ack", Ok(O::AckEffect)),
            ("POST", "effects/eff_1/dismiss", Ok(O::DismissEffect)),
            ("POST", "deliveries/evt_1/dismiss", Ok(O::DismissDelivery)),
            ("POST", "deliveries/replay/dismiss", Ok(O::DismissDelivery)),
            ("GET", "metrics", Ok(O::Metrics)),
            ("GET", "metrics/history", Ok(O::MetricsHistory)),
            ("GET", "metrics/history/", Ok(O::MetricsHistory)),
            ("POST", "metrics/history", not_allowed("GET")),
            ("GET", "effects/eff_1/ack", not_allowed("POST")),
            ("GET", "deliveries/evt_1/dismiss", not_allowed("POST")),
            ("GET", "alerts", Ok(O::ListAlerts)),
            ("POST", "alerts/alt_1/ack", Ok(O::AckAlert)),
            ("GET", "whoami", Ok(O::WhoAmI)),
            ("POST", "whoami", not_allowed("GET")),
            ("GET", "audit", Ok(O::ListAudit)),
            ("POST", "audit", not_allowed("GET")),
            ("GET", "openapi.json", Ok(O::OpenApi)),
            ("POST", "openapi.json", not_allowed("GET")),
            ("GET", "openapi", Err(CommandError::NotFound)),
            ("POST", "archive", Ok(O::Archive)),
            ("POST", "archive/", Ok(O::Archive)),
            ("GET", "archive", not_allowed("POST")),
            ("DELETE", "deliveries", not_allowed("GET")),
            ("POST", "deliveries", not_allowed("GET")),
            ("HEAD", "deliveries", not_allowed("GET")),
            ("POST", "deliveries/evt_1", not_allowed("GET")),
            ("PUT", "deliveries/replay", not_allowed("POST")),
            ("OPTIONS", "deliveries/replay/", not_allowed("POST")),
            ("GET", "deliveries/evt_1/replay", not_allowed("POST")),
            ("POST", "resources/inv_1", not_allowed("GET")),
            ("GET", "resources/inv_1/transition", not_allowed("POST")),
            ("PUT", "reconcile", not_allowed("GET, POST")),
            ("POST", "effects", not_allowed("GET")),
            ("POST", "metrics", not_allowed("GET")),
            ("POST", "alerts", not_allowed("GET")),
            ("GET", "alerts/alt_1/ack", not_allowed("POST")),
            ("GET", "effects/eff_1/redeliver", not_allowed("POST")),
            ("get", "deliveries", not_allowed("GET")),
            ("GET", "", Err(CommandError::NotFound)),
            ("GET", "/", Err(CommandError::NotFound)),
            ("GET", "nothing", Err(CommandError::NotFound)),
            ("GET", "effects/eff_1", Err(CommandError::NotFound)),
            ("POST", "alerts/alt_1", Err(CommandError::NotFound)),
            ("GET", "resources", Err(CommandError::NotFound)),
            (
                "GET",
                "deliveries/evt_1/replay/more",
                Err(CommandError::NotFound),
            ),
            ("POST", "Deliveries/replay", Err(CommandError::NotFound)),
        ];
        for (method, path, expected) in cases {
            assert_eq!(&ok(method, path), expected, "{method} {path}");
        }
    }

    #[test]
    fn parameters_are_the_segments_as_sent() {
        let r = resolve("POST", "deliveries/evt%5F1/replay/").unwrap();
        assert_eq!(r.params, vec!["evt%5F1"]);
        assert_eq!(r.id(), "evt%5F1");
        assert_eq!(resolve("GET", "metrics").unwrap().id(), "");
        assert_eq!(
            Route::of(Operation::AckAlert).path,
            "/alerts/{alert_id}/ack"
        );
    }
}
