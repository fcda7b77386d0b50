//! get and list.

use super::respond::{self, Shape};
use super::selectors::{FieldSelector, LabelSelector};
use super::Ctx;
use crate::body::Body;
use crate::registry::ResourceType;
use crate::status::Status;
use crate::store::meta_str;
use crate::table;
use base64::Engine;
use http::{Response, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;

/// GET one object.
pub(super) fn get(ctx: &Ctx<'_>) -> Result<Response<Body>, Status> {
    let shape = respond::negotiate(ctx.headers, ctx.query.get("includeObject"), false)?;
    let (rt, name) = (ctx.rt, ctx.info.name.as_str());
    let object = ctx
        .store
        .get(rt, ctx.namespace(), name)
        .ok_or_else(|| Status::not_found(rt.group, rt.plural, name))?;
    let object = in_version(rt, object);
    Ok(match shape {
        Shape::Json => respond::json(StatusCode::OK, &*object, ctx.headers),
        _ => respond::json(StatusCode::OK, &respond::shape_object(rt, &object, shape), ctx.headers),
    })
}

/// The object as served by `rt`'s version (objects are stored per group,
/// not per version).
pub(super) fn in_version(rt: &ResourceType, object: Arc<Value>) -> Arc<Value> {
    let api_version = rt.api_version();
    if object["apiVersion"].as_str() == Some(api_version.as_str()) {
        return object;
    }
    let mut copy = (*object).clone();
    if let Some(map) = copy.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(api_version));
    }
    Arc::new(copy)
}

/// The selectors of a list, watch or deletecollection.
pub(super) struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// Parse `labelSelector` and `fieldSelector` (400 when malformed).
    pub(super) fn from_query(ctx: &Ctx<'_>) -> Result<Self, Status> {
        Ok(Filter {
            labels: LabelSelector::parse(ctx.query.get("labelSelector"))?,
            fields: FieldSelector::parse(ctx.query.get("fieldSelector"), ctx.rt.group, ctx.rt.kind)?,
        })
    }

    /// Does `object` pass both selectors?
    pub(super) fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }

    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }
}

/// What a `continue` token holds, in kube-apiserver's own format.
#[derive(serde::Serialize, serde::Deserialize)]
struct Continue {
    v: String,
    rv: u64,
    start: String,
}

fn encode_continue(rv: u64, last: &Value) -> String {
    let token = Continue {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: format!("{}/{}\u{0}", meta_str(last, "namespace"), meta_str(last, "name")),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE.encode(json)
}

fn decode_continue(token: &str) -> Result<(u64, (String, String)), Status> {
    let invalid = |detail: String| Status::bad_request(format!("continue key is not valid: {detail}"));
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|e| invalid(e.to_string()))?;
    let token: Continue = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    if token.v != "meta.k8s.io/v1" {
        return Err(invalid(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
        ));
    }
    let start = token.start.trim_end_matches('\u{0}');
    let (ns, name) = start.split_once('/').unwrap_or(("", start));
    Ok((token.rv, (ns.to_string(), name.to_string())))
}

/// One page of a list: the items and the list metadata.
pub(super) fn page(ctx: &Ctx<'_>) -> Result<(Vec<Arc<Value>>, Value), Status> {
    let filter = Filter::from_query(ctx)?;
    let namespace = Some(ctx.namespace()).filter(|ns| !ns.is_empty());
    let (all, current) = ctx.store.list_with_revision(ctx.rt, namespace);
    let (revision, after) = match ctx.query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (rv, start) = decode_continue(token)?;
            (rv, Some(start))
        }
        None => (current, None),
    };
    let mut matching = all.into_iter().filter(|o| {
        let key = (meta_str(o, "namespace").to_string(), meta_str(o, "name").to_string());
        after.as_ref().is_none_or(|start| key > *start) && filter.matches(o)
    });
    if let Some(raw) = ctx.query.get("limit").filter(|raw| raw.parse::<i64>().is_err()) {
        let quoted = crate::rbac::go_quote(raw);
        return Err(Status::bad_request(format!(
            "strconv.ParseInt: parsing {quoted}: invalid syntax"
        )));
    }
    let limit = ctx
        .query
        .number("limit")
        .filter(|l| *l > 0)
        .map_or(usize::MAX, |l| l as usize);
    let items: Vec<Arc<Value>> = matching.by_ref().take(limit).map(|o| in_version(ctx.rt, o)).collect();
    let remaining = matching.count();
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if remaining > 0 {
        if let Some(last) = items.last() {
            metadata["continue"] = Value::String(encode_continue(revision, last));
            if filter.is_empty() {
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
    }
    Ok((items, metadata))
}

/// `<Kind>List` of `items`, serialized without copying them.
#[derive(serde::Serialize)]
struct List<'a> {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: Value,
    items: Vec<Item<'a>>,
}

/// A list item as kube-apiserver encodes it: a built-in type's list is
/// typed (`[]ConfigMap`), and Go's encoder leaves a typed item's empty
/// `TypeMeta` out, so items carry no `kind` or `apiVersion`; a custom
/// resource's list is unstructured and its items keep both.
struct Item<'a> {
    object: &'a Value,
    typed: bool,
}

impl serde::Serialize for Item<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(map) = self.object.as_object().filter(|_| self.typed) else {
            return self.object.serialize(serializer);
        };
        let kept = map.iter().filter(|(k, _)| !matches!(k.as_str(), "kind" | "apiVersion"));
        let mut out = serializer.serialize_map(None)?;
        for (key, value) in kept {
            out.serialize_entry(key, value)?;
        }
        out.end()
    }
}

fn items<'a>(rt: &ResourceType, objects: &'a [Arc<Value>]) -> Vec<Item<'a>> {
    let typed = crate::patch::schema::is_built_in(rt);
    objects.iter().map(|o| Item { object: o, typed }).collect()
}

/// The list body for `rt`.
pub(super) fn list_body(rt: &ResourceType, items: &[Arc<Value>], metadata: Value, shape: Shape) -> Value {
    match shape {
        Shape::Table(include) => table::table(rt, items, include, metadata),
        Shape::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "items": items.iter().map(|o| table::partial_object_metadata(o)).collect::<Vec<_>>(),
        }),
        Shape::Json => json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": metadata,
            "items": self::items(rt, items),
        }),
    }
}

/// GET a collection.
pub(super) fn list(ctx: &Ctx<'_>) -> Result<Response<Body>, Status> {
    let shape = respond::negotiate(ctx.headers, ctx.query.get("includeObject"), true)?;
    let (items, metadata) = page(ctx)?;
    Ok(match shape {
        Shape::Json => {
            let list = List {
                kind: format!("{}List", ctx.rt.kind),
                api_version: ctx.rt.api_version(),
                metadata,
                items: self::items(ctx.rt, &items),
            };
            respond::json(StatusCode::OK, &list, ctx.headers)
        }
        _ => respond::json(StatusCode::OK, &list_body(ctx.rt, &items, metadata, shape), ctx.headers),
    })
}
