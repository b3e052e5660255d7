//! The `greet` prompt and its argument completion.

use rmcp::{
    ErrorData,
    model::{
        CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams,
        GetPromptResult, Prompt, PromptArgument, PromptMessage, Reference, Role,
    },
};

/// Name of the only prompt.
pub(crate) const GREET: &str = "greet";
/// Completion candidates for `greet`'s `who` argument.
pub(crate) const WHO_CANDIDATES: [&str; 2] = ["alice", "bob"];

pub(crate) fn all() -> Vec<Prompt> {
    vec![Prompt::new(
        GREET,
        Some("Greets someone"),
        Some(vec![
            PromptArgument::new("who")
                .with_description("who to greet")
                .with_required(true),
        ]),
    )]
}

/// `greet` with `who` gives one user message `Hello <who> from <backend>`.
pub(crate) fn get(
    backend: &str,
    request: &GetPromptRequestParams,
) -> Result<GetPromptResult, ErrorData> {
    if request.name != GREET {
        return Err(ErrorData::invalid_params(
            format!("unknown prompt: {}", request.name),
            None,
        ));
    }
    let who = request
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get("who"))
        .and_then(|who| who.as_str())
        .ok_or_else(|| ErrorData::invalid_params("missing required argument: who", None))?;
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        format!("Hello {who} from {backend}"),
    )])
    .with_description(format!("{backend}: greeting")))
}

/// `ref/prompt` `greet`, argument `who`: the candidates starting with the typed prefix.
/// Anything else completes to nothing.
pub(crate) fn complete(
    _backend: &str,
    request: &CompleteRequestParams,
) -> Result<CompleteResult, ErrorData> {
    let values = match &request.r#ref {
        Reference::Prompt(prompt) if prompt.name == GREET && request.argument.name == "who" => {
            WHO_CANDIDATES
                .iter()
                .filter(|candidate| candidate.starts_with(request.argument.value.as_str()))
                .map(|candidate| (*candidate).to_owned())
                .collect()
        }
        _ => Vec::new(),
    };
    let completion =
        CompletionInfo::new(values).map_err(|message| ErrorData::internal_error(message, None))?;
    Ok(CompleteResult::new(completion))
}
