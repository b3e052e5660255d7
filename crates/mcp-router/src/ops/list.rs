//! The four list methods: concurrent fan-out, deterministic merge, gateway cursors.
//!
//! Items come in backend order (backend names sorted), each backend's items in its own order.
//! Every item is renamed to its public name ([`Namer`](crate::naming::Namer)); an item whose public
//! name collides with another backend's item is left out together with it (ambiguous), as is a
//! name over the length limit or, for tools, outside the spec's charset; all are named in the
//! degraded marker, like a tool that can only run as a task in a 2025 session's list. A collision
//! is found whichever pages the two items arrive on: when a public name could also belong to
//! another backend (the [`Namer`](crate::naming::Namer) says
//! [`Several`](crate::naming::Resolution::Several)) whose whole list is not on this merged page,
//! that backend is asked whether it lists the item, as a call on the name would ask it
//! ([`lists_item`]); each such backend's list is read once per list call for all its names
//! (`listed_of`). Nothing is remembered between pages: the check costs list requests only for
//! such names, which exist only where backend names prefix one another or aliases overlap. A
//! backend's `allowed_tools` (upstream names) filters its tools.
//! The first page asks every backend; `nextCursor` is a sealed [`MergedCursor`] over the backends
//! that have more, so an exhausted backend is never asked again. A backend that fails is left out
//! and named in the degraded marker; the call still succeeds.

use std::collections::{BTreeSet, HashMap, HashSet};

use futures_util::future::join_all;
use mcp_core::{Era, ErrorObject, Method, RawObject};
use serde_json::value::RawValue;

use mcp_fallback::ToolHints;

use crate::cursor::MergedCursor;
use crate::degraded::{CACHE_SCOPE, Degraded, TtlMin, ttl_of};
use crate::naming::{Resolution, check_public_name};
use crate::ops::scope::{BackendFailure, Scope, final_result};
use crate::ops::tool_hints::ToolHintsTable;
use crate::upstream::{Call, Target};
use mcp_core::ItemKind;

/// The shape of one list method.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListShape {
    /// The result array key.
    pub(crate) items_key: &'static str,
    /// The item field holding its public name.
    pub(crate) name_key: &'static str,
    /// The naming rules that apply.
    pub(crate) kind: ItemKind,
}

impl ListShape {
    pub(crate) fn of(method: Method) -> Option<Self> {
        let (items_key, name_key, kind) = match method {
            Method::ToolsList => ("tools", "name", ItemKind::Tool),
            Method::PromptsList => ("prompts", "name", ItemKind::Prompt),
            Method::ResourcesList => ("resources", "uri", ItemKind::Resource),
            Method::ResourceTemplatesList => {
                ("resourceTemplates", "uriTemplate", ItemKind::Resource)
            }
            _ => return None,
        };
        Some(Self {
            items_key,
            name_key,
            kind,
        })
    }
}

/// One backend's page.
struct Page {
    backend: String,
    items: Vec<Box<RawValue>>,
    next_cursor: Option<String>,
    ttl_ms: u64,
    /// Set when the page is the backend's last good answer (it failed just now).
    stale_age: Option<std::time::Duration>,
}

async fn fetch_page(
    scope: &Scope<'_>,
    method: Method,
    shape: ListShape,
    backend: &str,
    cursor: Option<&str>,
) -> Result<Page, BackendFailure> {
    let config = scope
        .ctx
        .vhost
        .backends
        .get(backend)
        .ok_or(BackendFailure::Upstream(
            crate::upstream::UpstreamError::NoUrl,
        ))?;
    let target = scope.target(backend, config);
    let mut params = RawObject::new();
    if let Some(cursor) = cursor {
        params.set_str("cursor", cursor);
    }
    let call = Call {
        method: method.as_str(),
        params,
        name: None,
        progress_token: None,
        hints: ToolHints::NONE,
        headers: None,
    };
    let key = stale_key(&target, scope, method.as_str(), cursor.unwrap_or_default());
    let fetched = final_result(scope, &target, &call, scope.fanout_deadline(config)).await;
    let (raw, stale_age) = match fetched {
        Ok(raw) => {
            if !scope.ops.stale_if_error.is_zero() {
                scope.ops.stale.insert(&scope.ctx.principal, key, &raw);
            }
            (raw, None)
        }
        Err(failure) => match scope.ops.stale.get(&key, scope.ops.stale_if_error) {
            // Stale-if-error: the caller's last good page of this backend, marked degraded.
            Some((value, age)) if !scope.ops.stale_if_error.is_zero() => (value, Some(age)),
            _ => return Err(failure),
        },
    };
    let result = RawObject::from_raw(&raw).unwrap_or_default();
    let items: Vec<Box<RawValue>> = result.get_as(shape.items_key).unwrap_or_default();
    Ok(Page {
        backend: backend.to_owned(),
        items,
        next_cursor: result.get_str("nextCursor"),
        // A stale page must not be cached further by the client.
        ttl_ms: if stale_age.is_some() {
            0
        } else {
            ttl_of(&result)
        },
        stale_age,
    })
}

/// The stale-if-error key of one backend answer to this caller.
pub(crate) fn stale_key(
    target: &Target<'_>,
    scope: &Scope<'_>,
    method: &str,
    cursor: &str,
) -> crate::ops::stale_answers::StaleKey {
    (
        target.primary_scope().opaque_id(),
        scope.ctx.vhost_id.as_str().to_owned(),
        target.name.to_owned(),
        method.to_owned(),
        cursor.to_owned(),
    )
}

/// Answers a list method: the merged result, or `-32602` for a cursor this caller did not get.
pub(crate) async fn list(
    scope: &Scope<'_>,
    method: Method,
    params: &RawObject<'_>,
) -> Result<RawObject<'static>, ErrorObject> {
    let shape =
        ListShape::of(method).ok_or_else(|| ErrorObject::method_not_found(method.as_str()))?;
    let binding = scope.binding(&[method.as_str()]);
    // A cursor that is present but not a string (nor null) is as invalid as a tampered one.
    if params
        .get("cursor")
        .is_some_and(|c| c.get() != "null" && !c.get().starts_with('"'))
    {
        return Err(ErrorObject::invalid_params("Invalid cursor"));
    }
    let pending: Vec<(String, Option<String>)> = match params.get_str("cursor") {
        Some(handle) => MergedCursor::open(&scope.ops.sealer, &binding, &handle)
            .map_err(|_| ErrorObject::invalid_params("Invalid cursor"))?
            .pending
            .into_iter()
            .map(|(b, c)| (b, Some(c)))
            .collect(),
        None => scope
            .ctx
            .vhost
            .backends
            .keys()
            .map(|b| (b.clone(), None))
            .collect(),
    };
    let pages = join_all(pending.iter().map(|(backend, cursor)| async move {
        (
            backend,
            fetch_page(scope, method, shape, backend, cursor.as_deref()).await,
        )
    }))
    .await;

    check_open_share(scope, pages.iter().map(|(_, page)| page.as_ref().err()))?;
    let mut degraded = Degraded::default();
    let mut ttl = TtlMin::default();
    let mut next = MergedCursor::default();
    let mut merged: Vec<(String, String, RawObject<'static>)> = Vec::new();
    // Backends whose whole list is on this page (asked from the start, no more to come).
    let mut complete: HashSet<String> = HashSet::new();
    // For the audit record: the backends merged fresh, and those left out or stale.
    let (mut answered, mut left_out) = (Vec::new(), Vec::new());
    let auditing = scope.ctx.audit.is_some();
    for ((backend, page), (_, cursor)) in pages.into_iter().zip(&pending) {
        if auditing {
            match &page {
                Ok(page) if page.stale_age.is_none() => answered.push(backend.clone()),
                _ => left_out.push(backend.clone()),
            }
        }
        match page {
            Ok(page) => {
                ttl.add(page.ttl_ms);
                if let Some(age) = page.stale_age {
                    degraded.stale(&page.backend, age);
                }
                match &page.next_cursor {
                    Some(next_cursor) => {
                        next.pending
                            .push((page.backend.clone(), next_cursor.clone()));
                    }
                    None if cursor.is_none() => {
                        complete.insert(page.backend.clone());
                    }
                    None => {}
                }
                rename_items(scope, shape, page, &mut merged, &mut degraded);
            }
            Err(failure) => degraded.backend(backend, failure.reason()),
        }
    }
    if let Some(audit) = &scope.ctx.audit {
        audit.fanout(answered, left_out);
    }
    let elsewhere = listed_elsewhere(scope, method, shape, &merged, &complete).await;
    let items = drop_collisions(merged, &elsewhere, &mut degraded);

    let mut result = RawObject::new();
    result.set_str("resultType", "complete");
    result.set_json(
        shape.items_key,
        &items.iter().map(|i| i.to_raw()).collect::<Vec<_>>(),
    );
    if !next.is_empty() {
        result.set_str("nextCursor", &next.seal(&scope.ops.sealer, &binding));
    }
    result.set_json("ttlMs", &ttl.get());
    result.set_str("cacheScope", CACHE_SCOPE);
    degraded.annotate_span();
    result.set_raw("_meta", degraded.to_meta(&scope.ops.server_info));
    Ok(result)
}

/// Fails a fan-out when more than the configured share of the asked backends were skipped
/// because their circuit breakers are open (book: docs/src/architecture.md: a near-empty list would mislead).
pub(crate) fn check_open_share<'f>(
    scope: &Scope<'_>,
    outcomes: impl Iterator<Item = Option<&'f BackendFailure>>,
) -> Result<(), ErrorObject> {
    let (mut asked, mut open) = (0usize, 0usize);
    for failure in outcomes {
        asked += 1;
        if matches!(
            failure,
            Some(BackendFailure::Upstream(
                crate::upstream::UpstreamError::CircuitOpen(_)
            ))
        ) {
            open += 1;
        }
    }
    if open > 0 && open as f64 > scope.ops.max_open_share * asked as f64 {
        return Err(ErrorObject::internal(format!(
            "Too many backends unavailable: {open} of {asked} have an open circuit breaker"
        )));
    }
    Ok(())
}

fn rename_items(
    scope: &Scope<'_>,
    shape: ListShape,
    page: Page,
    merged: &mut Vec<(String, String, RawObject<'static>)>,
    degraded: &mut Degraded,
) {
    let namer = scope.namer();
    let allowed = scope
        .ctx
        .vhost
        .backends
        .get(&page.backend)
        .and_then(|c| c.allowed_tools.as_ref());
    let filter = crate::ops::plugins::list_filter(scope, shape.kind);
    // One scope digest per page, not per tool; none for a backend hints decide nothing for.
    let hint_scope = if shape.kind == ItemKind::Tool {
        scope
            .ctx
            .vhost
            .backends
            .get(&page.backend)
            .and_then(|config| ToolHintsTable::scope_of(&scope.target(&page.backend, config)))
    } else {
        None
    };
    for raw in page.items {
        let Ok(item) = RawObject::parse(raw.get()) else {
            continue;
        };
        let Some(upstream) = item.get_str(shape.name_key) else {
            continue;
        };
        if let Some(hint_scope) = &hint_scope {
            scope
                .ops
                .hints
                .remember(hint_scope, &upstream, ToolHints::from_tool_json(&raw));
        }
        if shape.kind == ItemKind::Tool && allowed.is_some_and(|list| !list.contains(&upstream)) {
            continue;
        }
        let public = namer
            .public(&page.backend, &upstream, shape.kind)
            .into_owned();
        if shape.kind == ItemKind::Tool && scope.era == Era::Legacy && requires_tasks(&item) {
            // 2025 sessions are not offered tasks (see `legacy::initialize`): listed, such a tool
            // could only be called and then never followed up.
            degraded.item(&public, TASKS_REQUIRED);
            continue;
        }
        if let Some(chain) = &filter
            && !crate::ops::plugins::listed(
                chain,
                scope,
                shape.kind,
                &page.backend,
                &upstream,
                &public,
            )
        {
            continue;
        }
        if let Err(problem) = check_public_name(&public, shape.kind, scope.ops.max_name_len) {
            tracing::warn!(backend = %page.backend, name = %public, reason = problem.reason(), "item left out of merged list");
            degraded.item(&public, problem.reason());
            continue;
        }
        let mut owned = item.into_owned();
        owned.set_str(shape.name_key, &public);
        merged.push((public, page.backend.clone(), owned));
    }
}

/// Why a tool is left out of a 2025 session's list (named in the degraded marker).
const TASKS_REQUIRED: &str = "requires tasks, which 2025 sessions are not offered";

/// Whether a tool says it can only be called as a task (`execution.taskSupport: "required"`).
fn requires_tasks(tool: &RawObject<'_>) -> bool {
    tool.get("execution")
        .and_then(|execution| RawObject::from_raw(execution).ok())
        .and_then(|execution| execution.get_str("taskSupport"))
        .is_some_and(|support| support == "required")
}

/// The public names on this page that another backend lists on a page not merged here: for each
/// name that could also be another backend's (longer or shorter prefix, or an alias), and whose
/// other candidate backend's whole list is not on this page, that backend is asked. Each
/// (backend, upstream name) is asked once, concurrently; a backend that cannot be asked counts as
/// not listing it (as for a call on the name).
async fn listed_elsewhere(
    scope: &Scope<'_>,
    method: Method,
    shape: ListShape,
    merged: &[(String, String, RawObject<'static>)],
    complete: &HashSet<String>,
) -> HashSet<String> {
    let namer = scope.namer();
    // Candidate backend -> its upstream name -> the public names it would make ambiguous.
    let mut questions: HashMap<String, HashMap<String, BTreeSet<String>>> = HashMap::new();
    for (public, owner, _) in merged {
        let Resolution::Several(candidates) = namer.resolve(public, shape.kind) else {
            continue;
        };
        for candidate in candidates {
            if candidate.backend == owner.as_str() || complete.contains(candidate.backend) {
                continue;
            }
            questions
                .entry(candidate.backend.to_owned())
                .or_default()
                .entry(candidate.upstream.into_owned())
                .or_default()
                .insert(public.clone());
        }
    }
    // Each candidate backend is asked once, for all its questions (its list is read at most
    // once per list call, however many names it might make ambiguous).
    let answers = join_all(questions.into_iter().map(|(backend, asked)| async move {
        let wanted: HashSet<&str> = asked.keys().map(String::as_str).collect();
        let listed = listed_of(scope, method, shape, &backend, &wanted).await;
        asked
            .into_iter()
            .filter(|(upstream, _)| listed.contains(upstream.as_str()))
            .flat_map(|(_, names)| names)
            .collect::<Vec<_>>()
    }))
    .await;
    answers.into_iter().flatten().collect()
}

/// Whether `backend` lists `upstream` in `method` (its first pages only, bounded).
pub(crate) async fn lists_item(
    scope: &Scope<'_>,
    method: Method,
    shape: ListShape,
    backend: &str,
    upstream: &str,
) -> bool {
    let wanted = HashSet::from([upstream]);
    !listed_of(scope, method, shape, backend, &wanted)
        .await
        .is_empty()
}

/// Which of the `wanted` upstream names `backend` lists in `method`: its pages are read until
/// all are found or the list ends (its first 20 pages at most).
async fn listed_of(
    scope: &Scope<'_>,
    method: Method,
    shape: ListShape,
    backend: &str,
    wanted: &HashSet<&str>,
) -> HashSet<String> {
    const MAX_PAGES: usize = 20;
    let mut found = HashSet::new();
    let Some(config) = scope.ctx.vhost.backends.get(backend) else {
        return found;
    };
    let target = scope.target(backend, config);
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut params = RawObject::new();
        if let Some(c) = &cursor {
            params.set_str("cursor", c);
        }
        let call = Call {
            method: method.as_str(),
            params,
            name: None,
            progress_token: None,
            hints: ToolHints::NONE,
            headers: None,
        };
        let Ok(raw) = final_result(scope, &target, &call, scope.fanout_deadline(config)).await
        else {
            return found;
        };
        let Ok(result) = RawObject::from_raw(&raw) else {
            return found;
        };
        let items: Vec<Box<RawValue>> = result.get_as(shape.items_key).unwrap_or_default();
        for item in &items {
            if let Some(name) = RawObject::parse(item.get())
                .ok()
                .and_then(|o| o.get_str(shape.name_key))
                .filter(|n| wanted.contains(n.as_str()))
            {
                found.insert(name);
            }
        }
        if found.len() == wanted.len() {
            return found;
        }
        cursor = result.get_str("nextCursor");
        if cursor.is_none() {
            return found;
        }
    }
    found
}

/// Leaves out every item whose public name appears for more than one backend, on this page or
/// (`elsewhere`) on another backend's page not merged here.
fn drop_collisions(
    merged: Vec<(String, String, RawObject<'static>)>,
    elsewhere: &HashSet<String>,
    degraded: &mut Degraded,
) -> Vec<RawObject<'static>> {
    let mut owners: HashMap<&str, Vec<&str>> = HashMap::new();
    for (public, backend, _) in &merged {
        let list = owners.entry(public.as_str()).or_default();
        if !list.contains(&backend.as_str()) {
            list.push(backend.as_str());
        }
    }
    let mut ambiguous: Vec<String> = owners
        .iter()
        .filter(|(name, backends)| backends.len() > 1 || elsewhere.contains(**name))
        .map(|(name, _)| (*name).to_owned())
        .collect();
    ambiguous.sort_unstable();
    for name in &ambiguous {
        tracing::warn!(name = %name, "ambiguous public name left out of merged list");
        degraded.item(name, "ambiguous");
    }
    merged
        .into_iter()
        .filter(|(public, _, _)| !ambiguous.contains(public))
        .map(|(_, _, item)| item)
        .collect()
}
