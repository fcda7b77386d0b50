//! Discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<g>/<v>`,
//! OpenAPI. (Interface stub: owned by the discovery work.)

use crate::body::Body;
use http::{HeaderMap, Response};

/// Answer a discovery or other non-resource GET, or `None` if `path` is not
/// one.
pub fn handle(path: &str, headers: &HeaderMap) -> Option<Response<Body>> {
    let _ = (path, headers);
    None
}
