//! `test://<backend>/static` and the `test://<backend>/item/{id}` template.

use rmcp::{
    ErrorData,
    model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate},
};

pub(crate) fn static_uri(backend: &str) -> String {
    format!("test://{backend}/static")
}

fn item_prefix(backend: &str) -> String {
    format!("test://{backend}/item/")
}

pub(crate) fn all(backend: &str) -> Vec<Resource> {
    vec![
        Resource::new(static_uri(backend), "static")
            .with_description(format!("a fixed text from {backend}"))
            .with_mime_type("text/plain"),
    ]
}

pub(crate) fn templates(backend: &str) -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{}{{id}}", item_prefix(backend)), "item")
            .with_description(format!("item {{id}} of {backend}"))
            .with_mime_type("text/plain"),
    ]
}

/// rmcp's resource-not-found error for `uri`.
pub(crate) fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("resource not found: {uri}"),
        Some(serde_json::json!({ "uri": uri })),
    )
}

/// True for the URIs [`read`] serves: the static resource and any item of the template.
pub(crate) fn exists(backend: &str, uri: &str) -> bool {
    read(backend, uri).is_ok()
}

/// Reads a known URI; anything else is rmcp's resource-not-found error (`-32002`, which rmcp
/// turns into `-32602` for 2026-07-28 requests).
pub(crate) fn read(backend: &str, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let text = if uri == static_uri(backend) {
        format!("static from {backend}")
    } else if let Some(id) = uri
        .strip_prefix(&item_prefix(backend))
        .filter(|id| !id.is_empty() && !id.contains('/'))
    {
        format!("item {id} from {backend}")
    } else {
        return Err(not_found(uri));
    };
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type("text/plain"),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_uris() {
        assert!(read("b", "test://b/static").is_ok());
        assert!(read("b", "test://b/item/42").is_ok());
        for uri in [
            "test://b/item/",
            "test://b/item/a/b",
            "test://other/static",
            "x",
        ] {
            let error = read("b", uri).expect_err("unknown uri");
            assert_eq!(error.code, rmcp::model::ErrorCode::RESOURCE_NOT_FOUND);
        }
    }
}
