//! Opaque cursors over a fixed item list.

use rmcp::{ErrorData, model::PaginatedRequestParams};

use crate::spec::BackendSpec;

/// The page of `items` selected by the request's cursor, and the cursor of the next page.
///
/// Cursors are hex-encoded `<backend>|<list>|<offset>`: opaque to clients, bound to the backend
/// and the list they came from. An unknown or foreign cursor is `-32602`.
pub(crate) fn page<T: Clone>(
    spec: &BackendSpec,
    list: &str,
    items: &[T],
    request: &Option<PaginatedRequestParams>,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match request.as_ref().and_then(|params| params.cursor.as_deref()) {
        None => 0,
        Some(cursor) => decode(&spec.name, list, cursor)
            .filter(|offset| *offset < items.len())
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None))?,
    };
    let Some(page_size) = spec.page_size else {
        return Ok((items[start..].to_vec(), None));
    };
    let end = start.saturating_add(page_size).min(items.len());
    let next = (end < items.len()).then(|| encode(&spec.name, list, end));
    Ok((items[start..end].to_vec(), next))
}

fn encode(backend: &str, list: &str, offset: usize) -> String {
    format!("{backend}|{list}|{offset}")
        .bytes()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn decode(backend: &str, list: &str, cursor: &str) -> Option<usize> {
    if !cursor.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(cursor.get(at..at + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let text = String::from_utf8(bytes).ok()?;
    let offset = text.strip_prefix(&format!("{backend}|{list}|"))?;
    offset.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cursor: Option<String>) -> Option<PaginatedRequestParams> {
        cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)))
    }

    #[test]
    fn pages_cover_every_item_once() {
        let spec = BackendSpec::modern("b").page_size(2);
        let items: Vec<u32> = (0..5).collect();
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) = page(&spec, "tools", &items, &request(cursor)).expect("page");
            assert!(page.len() <= 2);
            seen.extend(page);
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, items);
    }

    #[test]
    fn foreign_and_garbage_cursors_are_invalid_params() {
        let spec = BackendSpec::modern("b").page_size(2);
        let items: Vec<u32> = (0..5).collect();
        for cursor in [
            encode("other", "tools", 2),
            encode("b", "prompts", 2),
            encode("b", "tools", 9),
            "zz".to_owned(),
            "abc".to_owned(),
        ] {
            let error = page(&spec, "tools", &items, &request(Some(cursor)))
                .expect_err("cursor must be rejected");
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        }
    }

    #[test]
    fn no_page_size_returns_everything() {
        let spec = BackendSpec::modern("b");
        let items: Vec<u32> = (0..5).collect();
        let (page, next) = page(&spec, "tools", &items, &None).expect("page");
        assert_eq!(page, items);
        assert!(next.is_none());
    }
}
