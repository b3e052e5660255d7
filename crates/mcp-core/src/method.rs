//! MCP method names and their classification across both eras.

use crate::Era;

/// Which way a message travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Sent by the client to the server.
    ClientToServer,
    /// Sent by the server to the client.
    ServerToClient,
    /// Sent either way (`ping` in legacy revisions, `notifications/progress`,
    /// `notifications/cancelled`).
    Both,
}

/// How a gateway handles a client request for this method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodKind {
    /// Session lifecycle and connection upkeep, answered by the gateway itself
    /// (`initialize`, `ping`, `server/discover`, `logging/setLevel`).
    Lifecycle,
    /// A list call: fanned out to every backend and merged.
    List,
    /// A call that targets one backend, found from a routing parameter ([`RouteKey`]).
    Targeted,
    /// A long-lived subscription (`subscriptions/listen`).
    Subscription,
    /// A notification.
    Notification,
    /// A request the server sends to the client (sampling, elicitation, roots).
    ServerRequest,
}

/// Which request parameter names the backend a targeted call goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKey {
    /// `params.name` (`tools/call`, `prompts/get`).
    Name,
    /// `params.uri` (`resources/read`, `resources/subscribe`, `resources/unsubscribe`).
    Uri,
    /// `params.ref.name` or `params.ref.uri` (`completion/complete`).
    Ref,
    /// `params.taskId` (tasks extension follow-ups).
    TaskId,
}

/// Which eras define a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eras {
    /// Only the 2025 revisions.
    LegacyOnly,
    /// Only 2026-07-28.
    ModernOnly,
    /// Both.
    Both,
}

impl Eras {
    /// Whether a method with these eras exists in `era`.
    pub fn contains(self, era: Era) -> bool {
        matches!(
            (self, era),
            (Self::Both, _) | (Self::LegacyOnly, Era::Legacy) | (Self::ModernOnly, Era::Modern)
        )
    }
}

macro_rules! methods {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $kind:ident, $dir:ident, $eras:ident, $route:expr; )*) => {
        /// A known MCP method. Anything else is carried as a plain string by the caller.
        ///
        /// ```
        /// use mcp_core::{Era, Method, MethodKind, RouteKey};
        ///
        /// let m = Method::from_name("tools/call").unwrap();
        /// assert_eq!(m.kind(), MethodKind::Targeted);
        /// assert_eq!(m.route_key(), Some(RouteKey::Name));
        /// assert!(m.exists_in(Era::Modern) && m.exists_in(Era::Legacy));
        /// assert!(!Method::Initialize.exists_in(Era::Modern));
        /// assert_eq!(Method::from_name("nope"), None);
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Method {
            $( $(#[$doc])* $variant, )*
        }

        impl Method {
            /// Every known method.
            pub const ALL: &'static [Method] = &[$(Method::$variant,)*];

            /// The method name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self { $(Method::$variant => $name,)* }
            }

            /// Looks a wire name up.
            pub fn from_name(name: &str) -> Option<Self> {
                match name { $($name => Some(Method::$variant),)* _ => None }
            }

            /// How a gateway handles it.
            pub const fn kind(self) -> MethodKind {
                match self { $(Method::$variant => MethodKind::$kind,)* }
            }

            /// Which way it travels.
            pub const fn direction(self) -> Direction {
                match self { $(Method::$variant => Direction::$dir,)* }
            }

            /// Which eras define it.
            pub const fn eras(self) -> Eras {
                match self { $(Method::$variant => Eras::$eras,)* }
            }

            /// The routing parameter of a targeted call.
            pub const fn route_key(self) -> Option<RouteKey> {
                match self { $(Method::$variant => $route,)* }
            }
        }
    };
}

methods! {
    /// `initialize` (legacy).
    Initialize = "initialize", Lifecycle, ClientToServer, LegacyOnly, None;
    /// `ping` (legacy, both directions).
    Ping = "ping", Lifecycle, Both, LegacyOnly, None;
    /// `server/discover` (modern).
    ServerDiscover = "server/discover", Lifecycle, ClientToServer, ModernOnly, None;
    /// `logging/setLevel` (legacy; modern clients send `_meta` `logLevel`).
    LoggingSetLevel = "logging/setLevel", Lifecycle, ClientToServer, LegacyOnly, None;
    /// `tools/list`.
    ToolsList = "tools/list", List, ClientToServer, Both, None;
    /// `prompts/list`.
    PromptsList = "prompts/list", List, ClientToServer, Both, None;
    /// `resources/list`.
    ResourcesList = "resources/list", List, ClientToServer, Both, None;
    /// `resources/templates/list`.
    ResourceTemplatesList = "resources/templates/list", List, ClientToServer, Both, None;
    /// `tasks/list` (legacy experimental tasks).
    TasksList = "tasks/list", List, ClientToServer, LegacyOnly, None;
    /// `tools/call`.
    ToolsCall = "tools/call", Targeted, ClientToServer, Both, Some(RouteKey::Name);
    /// `prompts/get`.
    PromptsGet = "prompts/get", Targeted, ClientToServer, Both, Some(RouteKey::Name);
    /// `resources/read`.
    ResourcesRead = "resources/read", Targeted, ClientToServer, Both, Some(RouteKey::Uri);
    /// `resources/subscribe` (legacy).
    ResourcesSubscribe = "resources/subscribe", Targeted, ClientToServer, LegacyOnly, Some(RouteKey::Uri);
    /// `resources/unsubscribe` (legacy).
    ResourcesUnsubscribe = "resources/unsubscribe", Targeted, ClientToServer, LegacyOnly, Some(RouteKey::Uri);
    /// `completion/complete`.
    CompletionComplete = "completion/complete", Targeted, ClientToServer, Both, Some(RouteKey::Ref);
    /// `tasks/get`.
    TasksGet = "tasks/get", Targeted, ClientToServer, Both, Some(RouteKey::TaskId);
    /// `tasks/cancel`.
    TasksCancel = "tasks/cancel", Targeted, ClientToServer, Both, Some(RouteKey::TaskId);
    /// `tasks/result` (legacy experimental tasks).
    TasksResult = "tasks/result", Targeted, ClientToServer, LegacyOnly, Some(RouteKey::TaskId);
    /// `tasks/update` (modern tasks extension).
    TasksUpdate = "tasks/update", Targeted, ClientToServer, ModernOnly, Some(RouteKey::TaskId);
    /// `subscriptions/listen` (modern).
    SubscriptionsListen = "subscriptions/listen", Subscription, ClientToServer, ModernOnly, None;
    /// `sampling/createMessage` (server to client; modern only inside MRTR).
    SamplingCreateMessage = "sampling/createMessage", ServerRequest, ServerToClient, Both, None;
    /// `elicitation/create` (server to client; modern only inside MRTR).
    ElicitationCreate = "elicitation/create", ServerRequest, ServerToClient, Both, None;
    /// `roots/list` (server to client; modern only inside MRTR).
    RootsList = "roots/list", ServerRequest, ServerToClient, Both, None;
    /// `notifications/initialized` (legacy).
    NotificationsInitialized = "notifications/initialized", Notification, ClientToServer, LegacyOnly, None;
    /// `notifications/cancelled`.
    NotificationsCancelled = "notifications/cancelled", Notification, Both, Both, None;
    /// `notifications/progress`.
    NotificationsProgress = "notifications/progress", Notification, Both, Both, None;
    /// `notifications/message` (log message).
    NotificationsMessage = "notifications/message", Notification, ServerToClient, Both, None;
    /// `notifications/roots/list_changed` (legacy).
    NotificationsRootsListChanged = "notifications/roots/list_changed", Notification, ClientToServer, LegacyOnly, None;
    /// `notifications/tools/list_changed`.
    NotificationsToolsListChanged = "notifications/tools/list_changed", Notification, ServerToClient, Both, None;
    /// `notifications/prompts/list_changed`.
    NotificationsPromptsListChanged = "notifications/prompts/list_changed", Notification, ServerToClient, Both, None;
    /// `notifications/resources/list_changed`.
    NotificationsResourcesListChanged = "notifications/resources/list_changed", Notification, ServerToClient, Both, None;
    /// `notifications/resources/updated`.
    NotificationsResourcesUpdated = "notifications/resources/updated", Notification, ServerToClient, Both, None;
    /// `notifications/elicitation/complete` (2025-11-25).
    NotificationsElicitationComplete = "notifications/elicitation/complete", Notification, ServerToClient, LegacyOnly, None;
    /// `notifications/tasks/status` (legacy experimental tasks).
    NotificationsTasksStatus = "notifications/tasks/status", Notification, ServerToClient, LegacyOnly, None;
    /// `notifications/tasks` (modern tasks extension).
    NotificationsTasks = "notifications/tasks", Notification, ServerToClient, ModernOnly, None;
    /// `notifications/subscriptions/acknowledged` (modern).
    NotificationsSubscriptionsAcknowledged = "notifications/subscriptions/acknowledged", Notification, ServerToClient, ModernOnly, None;
}

impl Method {
    /// Whether a method exists in an era.
    pub fn exists_in(self, era: Era) -> bool {
        self.eras().contains(era)
    }

    /// Whether a modern client must send `Mcp-Name` for this method (2026-07-28 standard headers;
    /// the tasks extension adds its follow-ups).
    pub fn requires_mcp_name_header(self) -> bool {
        matches!(
            self,
            Self::ToolsCall
                | Self::PromptsGet
                | Self::ResourcesRead
                | Self::TasksGet
                | Self::TasksUpdate
                | Self::TasksCancel
        )
    }

    /// Whether a modern client may call it: a client-to-server request of the modern era.
    pub fn is_modern_client_request(self) -> bool {
        self.exists_in(Era::Modern)
            && self.direction() == Direction::ClientToServer
            && self.kind() != MethodKind::Notification
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.as_str()), Some(*m));
        }
    }

    #[test]
    fn modern_client_requests_match_the_2026_schema() {
        // schema/2026-07-28 ClientRequest, plus the tasks extension follow-ups.
        let mut modern: Vec<&str> = Method::ALL
            .iter()
            .filter(|m| m.is_modern_client_request())
            .map(|m| m.as_str())
            .collect();
        modern.sort_unstable();
        assert_eq!(
            modern,
            [
                "completion/complete",
                "prompts/get",
                "prompts/list",
                "resources/list",
                "resources/read",
                "resources/templates/list",
                "server/discover",
                "subscriptions/listen",
                "tasks/cancel",
                "tasks/get",
                "tasks/update",
                "tools/call",
                "tools/list",
            ]
        );
    }

    #[test]
    fn targeted_calls_have_route_keys() {
        for m in Method::ALL {
            assert_eq!(
                m.kind() == MethodKind::Targeted,
                m.route_key().is_some(),
                "{m:?}"
            );
        }
    }
}
