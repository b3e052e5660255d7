//! From the public name a call uses to the backend that owns it: the name's slot in the params
//! (`name`, `uri`, a completion `ref`, a task id), the backend its prefix names (or, when several
//! could, the one whose list has it), the upstream name written back, and a `requestState` the
//! gateway minted opened (book: docs/src/failure-modes.md).

use mcp_config_store::BackendConfig;
use mcp_core::{Era, ErrorObject, ItemKind, Method, RawObject, error_code};

use crate::naming::{Namer, Resolution, Target as NameTarget};
use crate::ops::list::{ListShape, lists_item};
use crate::ops::request_state::{self, State};
use crate::ops::scope::Scope;
use crate::ops::task_id::{self, Origin};

/// Where the routed name sits in the params.
#[derive(Clone, Copy)]
pub(super) enum NameSlot {
    /// `params.name`.
    Name,
    /// `params.uri`.
    Uri,
    /// `params.ref.name` / `params.ref.uri`.
    Ref(&'static str),
}

pub(super) struct Routed<'a> {
    pub(super) backend: &'a str,
    pub(super) config: &'a BackendConfig,
    pub(super) upstream: String,
    /// For a task follow-up: the task.
    pub(super) task: Option<FollowedTask>,
}

/// The task a follow-up (`tasks/get|update|cancel`) names.
#[derive(Clone)]
pub(super) struct FollowedTask {
    /// The call that created it.
    pub(super) origin: Origin,
    /// The backend's own id (`Routed::upstream`) and the gateway id the client knows it by.
    /// Answers about that task show the client's id again: sealing afresh (a new nonce) would
    /// give one task a new id on every follow-up.
    pub(super) ids: (String, String),
}

/// Why a call was refused before it reached a backend.
pub(super) enum Refused {
    /// Several backends expose the name.
    Ambiguous(ErrorObject),
    Error(ErrorObject),
}

impl From<ErrorObject> for Refused {
    fn from(error: ErrorObject) -> Self {
        Self::Error(error)
    }
}

pub(super) fn wrong_name(scope: &Scope<'_>, what: &str, name: &str) -> ErrorObject {
    let code = match scope.era {
        Era::Modern => error_code::INVALID_PARAMS,
        Era::Legacy => error_code::INTERNAL_ERROR,
    };
    ErrorObject::new(code, format!("{what}: {name}"))
}

/// The routed backend, the upstream params, the name (or task id) the caller used, and the token
/// of the parked call a retry resumes, with the node holding it.
pub(super) type Prepared<'a> = (Routed<'a>, RawObject<'static>, String, Option<Parked>);

/// A parked call's token and the node holding it (`None`: minted before states named it).
pub(super) type Parked = (String, Option<String>);

/// Finds the backend and builds the upstream params.
pub(super) async fn prepare<'a>(
    scope: &Scope<'a>,
    method: Method,
    mut params: RawObject<'_>,
) -> Result<Prepared<'a>, Refused> {
    if matches!(
        method,
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel
    ) {
        return Ok(prepare_task(scope, params)?);
    }
    let (slot, kind, what) = match method {
        Method::ToolsCall => (NameSlot::Name, ItemKind::Tool, "wrong tool name"),
        Method::PromptsGet => (NameSlot::Name, ItemKind::Prompt, "wrong prompt name"),
        Method::ResourcesRead | Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
            (NameSlot::Uri, ItemKind::Resource, "wrong resource name")
        }
        _ => completion_slot(&params)?,
    };
    let public = read_name(&params, slot)
        .ok_or_else(|| ErrorObject::invalid_params(format!("{what}: missing name")))?;
    let routed = resolve(scope, method, kind, &public, what).await?;
    if kind == ItemKind::Tool
        && routed
            .config
            .allowed_tools
            .as_ref()
            .is_some_and(|allowed| !allowed.contains(&routed.upstream))
    {
        return Err(wrong_name(scope, what, &public).into());
    }
    write_name(&mut params, slot, &routed.upstream);
    let mut parked = None;
    if let Some(handle) = params.get_str("requestState") {
        let binding = scope.binding(&[routed.backend, method.as_str(), &routed.upstream]);
        let state = request_state::unwrap(&scope.ops.sealer, &binding, &handle)
            .map_err(|e| ErrorObject::invalid_params(format!("Invalid requestState ({e})")))?;
        match state {
            State::Backend(inner_state) => params.set_str("requestState", &inner_state),
            State::Parked { token, node } => parked = Some((token, node)),
        }
    }
    Ok((routed, params.into_owned(), public, parked))
}

/// A tasks-extension follow-up: the gateway task id leads to the backend and its raw id.
pub(super) fn prepare_task<'a>(
    scope: &Scope<'a>,
    mut params: RawObject<'_>,
) -> Result<Prepared<'a>, ErrorObject> {
    let unknown = || ErrorObject::invalid_params("Unknown task");
    let public = params.get_str("taskId").ok_or_else(unknown)?;
    let task =
        task_id::open(&scope.ops.sealer, &scope.binding(&[]), &public).map_err(|_| unknown())?;
    let (backend, config) = scope
        .ctx
        .vhost
        .backends
        .get_key_value(&task.backend)
        .ok_or_else(unknown)?;
    params.set_str("taskId", &task.raw);
    let routed = Routed {
        backend: backend.as_str(),
        config,
        upstream: task.raw.clone(),
        task: Some(FollowedTask {
            origin: task.origin,
            ids: (task.raw, public.clone()),
        }),
    };
    Ok((routed, params.into_owned(), public, None))
}

pub(super) fn completion_slot(
    params: &RawObject<'_>,
) -> Result<(NameSlot, ItemKind, &'static str), ErrorObject> {
    let reference: Option<RawObject<'_>> = params
        .get("ref")
        .and_then(|r| RawObject::parse(r.get()).ok());
    let kind = reference.as_ref().and_then(|r| r.get_str("type"));
    match kind.as_deref() {
        Some("ref/prompt") => Ok((
            NameSlot::Ref("name"),
            ItemKind::Prompt,
            "wrong completion reference",
        )),
        Some("ref/resource") => Ok((
            NameSlot::Ref("uri"),
            ItemKind::Resource,
            "wrong completion reference",
        )),
        _ => Err(ErrorObject::invalid_params(
            "wrong completion reference: unknown ref type",
        )),
    }
}

pub(super) fn read_name(params: &RawObject<'_>, slot: NameSlot) -> Option<String> {
    match slot {
        NameSlot::Name => params.get_str("name"),
        NameSlot::Uri => params.get_str("uri"),
        NameSlot::Ref(key) => params
            .get("ref")
            .and_then(|r| RawObject::parse(r.get()).ok())
            .and_then(|r| r.get_str(key)),
    }
}

pub(super) fn write_name(params: &mut RawObject<'_>, slot: NameSlot, upstream: &str) {
    match slot {
        NameSlot::Name => params.set_str("name", upstream),
        NameSlot::Uri => params.set_str("uri", upstream),
        NameSlot::Ref(key) => {
            let text = params
                .get("ref")
                .map(|r| r.get().to_owned())
                .unwrap_or_default();
            if let Ok(mut reference) = RawObject::parse(&text) {
                reference.set_str(key, upstream);
                let raw = reference.to_raw();
                params.set_raw("ref", raw);
            }
        }
    }
}

/// Public name to backend (book: docs/src/failure-modes.md and docs/src/architecture.md).
pub(super) async fn resolve<'a>(
    scope: &Scope<'a>,
    method: Method,
    kind: ItemKind,
    public: &str,
    what: &str,
) -> Result<Routed<'a>, Refused> {
    let namer: Namer<'a> = scope.namer();
    let found = |t: NameTarget<'_>| -> Option<Routed<'a>> {
        let (backend, config) = scope.ctx.vhost.backends.get_key_value(t.backend)?;
        Some(Routed {
            backend: backend.as_str(),
            config,
            upstream: t.upstream.into_owned(),
            task: None,
        })
    };
    match namer.resolve(public, kind) {
        Resolution::None => Err(wrong_name(scope, what, public).into()),
        Resolution::One(t) => Ok(found(t).ok_or_else(|| wrong_name(scope, what, public))?),
        Resolution::Several(candidates) => {
            let exposing = exposing(scope, method, kind, &candidates).await;
            match exposing.len() {
                0 => Ok(candidates
                    .into_iter()
                    .next()
                    .and_then(found)
                    .ok_or_else(|| wrong_name(scope, what, public))?),
                1 => Ok(exposing
                    .into_iter()
                    .next()
                    .and_then(found)
                    .ok_or_else(|| wrong_name(scope, what, public))?),
                _ => Err(Refused::Ambiguous(ErrorObject::invalid_request(format!(
                    "ambiguous name: {public} (several backends expose it)"
                )))),
            }
        }
    }
}

/// The candidates whose backend actually lists the item.
pub(super) async fn exposing<'a>(
    scope: &Scope<'_>,
    method: Method,
    kind: ItemKind,
    candidates: &[NameTarget<'a>],
) -> Vec<NameTarget<'a>> {
    let list_method = match (method, kind) {
        (_, ItemKind::Tool) => Method::ToolsList,
        (_, ItemKind::Prompt) => Method::PromptsList,
        (_, ItemKind::Resource) => Method::ResourcesList,
    };
    let Some(shape) = ListShape::of(list_method) else {
        return Vec::new();
    };
    let checks = candidates.iter().map(|candidate| async move {
        lists_item(
            scope,
            list_method,
            shape,
            candidate.backend,
            &candidate.upstream,
        )
        .await
        .then(|| candidate.clone())
    });
    futures_util::future::join_all(checks)
        .await
        .into_iter()
        .flatten()
        .collect()
}
