//! The `notes` demo backend.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, prompt, prompt_handler, prompt_router, schemars, tool,
    tool_handler, tool_router,
};
use serde::Deserialize;

use super::text;

/// One note.
#[derive(Clone, Debug)]
struct Note {
    title: String,
    body: String,
    tags: Vec<String>,
    created: jiff::Timestamp,
}

/// Notes shared by every request of the backend (rmcp makes a handler per request or session).
#[derive(Clone, Default)]
pub(crate) struct NotesStore(Arc<Mutex<(u64, BTreeMap<u64, Note>)>>);

impl NotesStore {
    fn with<T>(&self, f: impl FnOnce(&mut (u64, BTreeMap<u64, Note>)) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn render_note(id: u64, note: &Note) -> String {
    let tags = if note.tags.is_empty() {
        String::new()
    } else {
        format!(" [{}]", note.tags.join(", "))
    };
    format!(
        "#{id} {}{tags} ({})\n{}",
        note.title,
        note.created.strftime("%Y-%m-%d %H:%M UTC"),
        note.body
    )
}

#[derive(Clone)]
pub(crate) struct NotesServer {
    store: NotesStore,
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct AddNoteArgs {
    /// A short title.
    title: String,
    /// The note's text.
    body: String,
    /// Optional tags, e.g. ["work", "ideas"].
    tags: Option<Vec<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ListNotesArgs {
    /// Only notes with this tag.
    tag: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SearchNotesArgs {
    /// Text to look for in titles and bodies (case-insensitive).
    query: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct DeleteNoteArgs {
    /// The note's number, as shown by list_notes.
    id: u64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SummarizeArgs {
    /// Only notes with this tag.
    tag: Option<String>,
}

#[tool_router]
impl NotesServer {
    pub(crate) fn new(store: NotesStore) -> Self {
        Self {
            store,
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }

    #[tool(description = "Add a note; returns its number")]
    async fn add_note(
        &self,
        Parameters(args): Parameters<AddNoteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if args.title.trim().is_empty() {
            return Err(ErrorData::invalid_params(
                "the title must not be empty",
                None,
            ));
        }
        let id = self.store.with(|(next, notes)| {
            *next += 1;
            notes.insert(
                *next,
                Note {
                    title: args.title.trim().to_owned(),
                    body: args.body,
                    tags: args.tags.unwrap_or_default(),
                    created: jiff::Timestamp::now(),
                },
            );
            *next
        });
        Ok(text(format!("added note #{id}")))
    }

    #[tool(description = "List notes (newest last), optionally only those with a tag")]
    async fn list_notes(
        &self,
        Parameters(args): Parameters<ListNotesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let lines: Vec<String> = self.store.with(|(_, notes)| {
            notes
                .iter()
                .filter(|(_, n)| args.tag.as_ref().is_none_or(|t| n.tags.contains(t)))
                .map(|(id, n)| render_note(*id, n))
                .collect()
        });
        Ok(text(if lines.is_empty() {
            "no notes yet".to_owned()
        } else {
            lines.join("\n\n")
        }))
    }

    #[tool(description = "Search notes by text in the title or body")]
    async fn search_notes(
        &self,
        Parameters(args): Parameters<SearchNotesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = args.query.to_lowercase();
        let lines: Vec<String> = self.store.with(|(_, notes)| {
            notes
                .iter()
                .filter(|(_, n)| {
                    n.title.to_lowercase().contains(&query)
                        || n.body.to_lowercase().contains(&query)
                })
                .map(|(id, n)| render_note(*id, n))
                .collect()
        });
        Ok(text(if lines.is_empty() {
            format!("no note mentions `{}`", args.query)
        } else {
            lines.join("\n\n")
        }))
    }

    #[tool(description = "Delete a note by number")]
    async fn delete_note(
        &self,
        Parameters(args): Parameters<DeleteNoteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.store.with(|(_, notes)| notes.remove(&args.id)) {
            Some(note) => Ok(text(format!("deleted note #{} ({})", args.id, note.title))),
            None => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "there is no note #{}",
                args.id
            ))])),
        }
    }
}

#[prompt_router]
impl NotesServer {
    /// Asks for a summary of the notes.
    #[prompt(
        name = "summarize_notes",
        description = "Summarize the stored notes, optionally those with one tag"
    )]
    async fn summarize_notes(
        &self,
        Parameters(args): Parameters<SummarizeArgs>,
    ) -> Vec<PromptMessage> {
        let notes: Vec<String> = self.store.with(|(_, notes)| {
            notes
                .iter()
                .filter(|(_, n)| args.tag.as_ref().is_none_or(|t| n.tags.contains(t)))
                .map(|(id, n)| render_note(*id, n))
                .collect()
        });
        vec![PromptMessage::new_text(
            Role::User,
            format!(
                "Summarize these notes in a few bullet points, grouping related ones:\n\n{}",
                if notes.is_empty() {
                    "(no notes yet)".to_owned()
                } else {
                    notes.join("\n\n")
                }
            ),
        )]
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for NotesServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("demo-notes", env!("CARGO_PKG_VERSION")))
        .with_instructions("An in-memory notes store: add, list, search and delete notes.")
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let all = Resource::new("notes://all", "all-notes")
            .with_description("Every note as Markdown")
            .with_mime_type("text/markdown");
        Ok(ListResourcesResult::with_all_items(vec![all]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let one = ResourceTemplate::new("notes://note/{id}", "note")
            .with_description("One note by number")
            .with_mime_type("text/markdown");
        Ok(ListResourceTemplatesResult::with_all_items(vec![one]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let body = if uri == "notes://all" {
            let all: Vec<String> = self
                .store
                .with(|(_, notes)| notes.iter().map(|(id, n)| render_note(*id, n)).collect());
            Some(if all.is_empty() {
                "(no notes yet)".to_owned()
            } else {
                all.join("\n\n")
            })
        } else {
            uri.strip_prefix("notes://note/")
                .and_then(|id| id.parse::<u64>().ok())
                .and_then(|id| {
                    self.store
                        .with(|(_, notes)| notes.get(&id).map(|n| render_note(id, n)))
                })
        };
        match body {
            Some(body) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(body, uri).with_mime_type("text/markdown"),
            ])
            .into()),
            None => Err(ErrorData::resource_not_found(
                format!("no resource {uri}"),
                None,
            )),
        }
    }
}
