package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	httpapi "github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/ledger"
)

var update = flag.Bool("update", false, "rewrite internal/server/api/openapi.json from the route table, the wire types and live answers")

// The OpenAPI document is built here, from three sources, and committed as
// openapi.json (served at GET /openapi.json):
//   - the operation table below (paths, parameters, roles, statuses);
//   - the component schemas, reflected from the Go types the handlers
//     encode (so a field added to a wire type is described the moment the
//     document is regenerated, and a stale document fails the test);
//   - the examples: real answers of a real ledger (NATS + Pebble) to the
//     walkthrough's envelopes.
//
// TestOpenAPIDocument fails when the committed document differs from the
// generated one (examples aside), when a route the API mounts is not
// described or a described one is not mounted, when a live answer does not
// validate against its schema, or when a documented example no longer has
// the shape (members and their JSON types) of the live answer.

// op is one operation of the document.
type op struct {
	method, path string
	summary      string
	role         string // "" open; else the role that may call it
	params       []param
	body         *reqBody
	responses    []resp
	// example: the request whose live answer is the example of the first
	// response (a path with query; "" for none).
	example     string
	exampleBody string
}

type param struct {
	name, in, typ, desc string
	required            bool
	enum                []string
}

type reqBody struct {
	desc    string
	content map[string]string // media type -> schema name ("" = string)
}

type resp struct {
	status  int
	desc    string
	schema  string // component schema name; "" = no JSON body
	media   string // default application/json
	example bool
}

var (
	pSpace  = param{name: "space", in: "query", typ: "string", desc: "The space (tenant); the server's default space when absent."}
	pMinSeq = param{name: "min_seq", in: "query", typ: "integer", desc: "Wait (bounded, then 503 not_caught_up) until the projection has applied this stream sequence: read-your-writes."}
	pAsOf   = param{name: "as_of", in: "query", typ: "string", desc: "Answer as of this time (RFC 3339): the projection folded up to the last event at or before it."}
	pAsOfSq = param{name: "as_of_seq", in: "query", typ: "integer", desc: "Answer as of this stream sequence."}
	pID     = param{name: "id", in: "path", typ: "string", desc: "The proposal id (its envelope id).", required: true}
	errResp = func(status int, desc string) resp { return resp{status: status, desc: desc, schema: "ErrorBody"} }
	readErr = []resp{errResp(400, "A query parameter is unknown, repeated or malformed (field names it)."), errResp(401, "No or a bad token (with --auth)."), errResp(403, "The token lacks the role."), errResp(429, "A min_seq wait over the caller's share of waiting requests (too_many_holds), or an as-of read needing a fold while the caller has one in hand (as_of_busy); Retry-After says when to retry."), errResp(503, "min_seq not reached in time, the stream did not answer, or an as-of read needing a fold while the server's folds are all in hand or the temporary directory has no room (as_of_busy, Retry-After).")}
)

func reads(ps ...param) []param { return append(ps, pSpace, pMinSeq, pAsOf, pAsOfSq) }

func states() []string {
	out := make([]string, len(api.States))
	for i, s := range api.States {
		out[i] = string(s)
	}
	return out
}

// operations is the route table of the document. Keep it in the order of
// the README's HTTP API section.
var operations = []op{
	{method: "get", path: "/v1/proposals/{id}", summary: "One proposal's state (contract §7 proposal object).", role: "auditor",
		params: reads(pID), example: "/v1/proposals/env-req-1",
		responses: append([]resp{{status: 200, desc: "The proposal.", schema: "Proposal", example: true}, errResp(404, "No proposal with that id in the space.")}, readErr...)},
	{method: "get", path: "/v1/proposals/{id}/history", summary: "Every event filed under a proposal, in stream order, with its effect.", role: "auditor",
		params: reads(pID), example: "/v1/proposals/env-req-1/history",
		responses: append([]resp{{status: 200, desc: "The history.", schema: "History", example: true}, errResp(404, "Nothing filed under that id.")}, readErr...)},
	{method: "get", path: "/v1/proposals", summary: "Proposals, newest first, filtered, with stable cursor paging.", role: "auditor",
		params: reads(
			param{name: "state", in: "query", typ: "string", desc: "Only proposals in this state.", enum: states()},
			param{name: "proposer", in: "query", typ: "string", desc: "Only proposals from this sender."},
			param{name: "target", in: "query", typ: "string", desc: "Only proposals whose to names this participant."},
			param{name: "since", in: "query", typ: "string", desc: "Created at or after this time (RFC 3339)."},
			param{name: "until", in: "query", typ: "string", desc: "Created before this time (RFC 3339)."},
			param{name: "anomaly", in: "query", typ: "string", desc: "Only proposals carrying this anomaly."},
			param{name: "action_type", in: "query", typ: "string", desc: "Kernel proposals of this action type."},
			param{name: "resource_type", in: "query", typ: "string", desc: "Kernel proposals whose target has this resource type."},
			param{name: "domain", in: "query", typ: "string", desc: "Kernel proposals whose target is in this domain."},
			param{name: "limit", in: "query", typ: "integer", desc: "Page size (default 100, at most 1000)."},
			param{name: "cursor", in: "query", typ: "string", desc: "The next_cursor of the previous page."}),
		example:   "/v1/proposals?limit=2",
		responses: append([]resp{{status: 200, desc: "A page.", schema: "List", example: true}}, readErr...)},
	{method: "get", path: "/v1/stats", summary: "Counts by state, rejection and withdrawal reason, anomaly, event type and effect.", role: "auditor",
		params: reads(), example: "/v1/stats",
		responses: append([]resp{{status: 200, desc: "The space's statistics.", schema: "Stats", example: true}}, readErr...)},
	{method: "get", path: "/v1/gaps", summary: "The recording gaps of bridges (contract §14), oldest first, paged by cursor.", role: "auditor",
		params: reads(param{name: "limit", in: "query", typ: "integer", desc: "Page size."},
			param{name: "cursor", in: "query", typ: "string", desc: "The next_cursor of the previous page."}),
		example:   "/v1/gaps",
		responses: append([]resp{{status: 200, desc: "A page of gaps.", schema: "Gaps", example: true}}, readErr...)},
	{method: "get", path: "/v1/holes", summary: "The holes of a space (contract §14 several recorders): windows of a MEW space no recorder recorded, with the envelopes stored on either side and the recorders in gap; and what the ledger knows of each recorder.", role: "auditor",
		params:    reads(param{name: "mew_space", in: "query", typ: "string", desc: "Only this MEW space's holes and recorders."}),
		example:   "/v1/holes",
		responses: append([]resp{{status: 200, desc: "The holes, oldest first per MEW space.", schema: "Holes", example: true}}, readErr...)},
	{method: "post", path: "/v1/gaps", summary: "A bridge reports a recording gap; the ledger writes the ledger/gap event itself (sender ledger). Only from a token allowed to record that bridge (role recorder, the bridge among its bridges when it lists any).", role: "recorder",
		params: []param{pSpace},
		body:   &reqBody{desc: "The gap: bridge, times, last envelope seen, reason.", content: map[string]string{"application/json": "GapReport"}},
		responses: []resp{{status: 202, desc: "Stored (a repeated report is a duplicate).", schema: "AppendResult"},
			errResp(400, "The report is malformed (field names the member), or dated over a minute ahead of the ledger's clock (clock_ahead)."), errResp(401, "No or a bad token."),
			errResp(403, "The token lacks the recorder role or the space (forbidden), or may not speak for this bridge (not_recorder)."),
			errResp(409, "last_seq is past the log's last sequence (gap_ahead)."),
			errResp(413, "The report is over the size limit (oversize; the message gives the limit)."), errResp(429, "The body is awaited over the caller's share of waiting requests (too_many_holds); Retry-After."),
			errResp(503, "Not acknowledged (retrying is safe), or the disk is full (storage_full, Retry-After: answered at once while it lasts).")}},
	{method: "get", path: "/v1/events", summary: "Every event of the ledger (contract §7), in stream order or newest first, with its effect, type, kind, form, sender, proposals, anomalies and the fold's reason; from the event index the fold writes, filtered, with stable cursor paging.", role: "auditor",
		params: []param{
			{name: "space", in: "query", typ: "string", desc: "The space; the server's default space when absent; * for every space (refused to a token limited to spaces)."},
			pMinSeq,
			{name: "effect", in: "query", typ: "string", desc: "Only events with this effect (on any proposal they touch).", enum: []string{"applied", "recorded", "duplicate", "late", "unauthorized", "invalid", "orphan", "ignored"}},
			{name: "type", in: "query", typ: "string", desc: "Only events of this type (contract §3; ignored for non-lifecycle kinds)."},
			{name: "kind", in: "query", typ: "string", desc: "Only events of this kind, as sent (e.g. mcp/proposal)."},
			{name: "form", in: "query", typ: "string", desc: "Only events of this lifecycle form (contract §2)."},
			{name: "from", in: "query", typ: "string", desc: "Only events from this sender."},
			{name: "proposal", in: "query", typ: "string", desc: "Only events filed under this id (a proposal, or the id an orphan waits for)."},
			{name: "anomaly", in: "query", typ: "string", desc: "Only events that raised this anomaly."},
			{name: "tool", in: "query", typ: "string", desc: "Only tools/call events of this tool (params.name)."},
			{name: "reason", in: "query", typ: "string", desc: "Only events with this reason code (withdraw, reject, approve)."},
			{name: "code", in: "query", typ: "string", desc: "Only events the fold refused with this code (e.g. not_json)."},
			{name: "event", in: "query", typ: "string", desc: "Only events with this envelope id."},
			{name: "since", in: "query", typ: "string", desc: "Stored at or after this time (RFC 3339)."},
			{name: "until", in: "query", typ: "string", desc: "Stored at or before this time (RFC 3339)."},
			{name: "since_seq", in: "query", typ: "integer", desc: "From this sequence on (inclusive)."},
			{name: "until_seq", in: "query", typ: "integer", desc: "Up to this sequence (inclusive)."},
			{name: "as_of_seq", in: "query", typ: "integer", desc: "The log as of this sequence (caps until_seq); effects are shown as the fold sees them now."},
			{name: "as_of", in: "query", typ: "string", desc: "The log as of this time (caps until)."},
			{name: "order", in: "query", typ: "string", desc: "asc: stream order (default); desc: newest first. A cursor continues in its own order.", enum: []string{"asc", "desc"}},
			{name: "limit", in: "query", typ: "integer", desc: "Page size (default 100, at most 1000)."},
			{name: "cursor", in: "query", typ: "string", desc: "The next_cursor of the previous page."}},
		example:   "/v1/events?space=*&limit=3",
		responses: append([]resp{{status: 200, desc: "A page of events.", schema: "EventPage", example: true}}, readErr...)},
	{method: "get", path: "/v1/events/{seq}", summary: "One stored message, raw (subject, headers, stream time, original bytes as base64 and, when UTF-8, as text, their SHA-256), beside its record in the event index.", role: "auditor",
		params: []param{{name: "seq", in: "path", typ: "integer", desc: "The stream sequence.", required: true},
			{name: "space", in: "query", typ: "string", desc: "The space the message must be in (default: the default space; * any)."}, pMinSeq},
		example:   "/v1/events/1",
		responses: append([]resp{{status: 200, desc: "The message and its record.", schema: "RawEvent", example: true}, errResp(404, "The stream holds no message at seq, or it is in another space.")}, readErr...)},
	{method: "get", path: "/v1/bridges", summary: "What the ledger knows of each bridge recording into the space (contract §14), derived from the log: the last envelope stored from it, its session, and whether a gap covers everything since (a bridge reads it when it starts, with min_seq=latest: the log's last sequence when the request arrives; writer and recorder tokens may too).", role: "auditor",
		params: reads(param{name: "bridge", in: "query", typ: "string", desc: "Only this bridge (participant)."},
			param{name: "mew_space", in: "query", typ: "string", desc: "Only this MEW space."}),
		example:   "/v1/bridges",
		responses: append([]resp{{status: 200, desc: "The bridges, by bridge and MEW space.", schema: "Bridges", example: true}}, readErr...)},
	{method: "get", path: "/v1/watch", summary: "Server-Sent Events: one event per change of a proposal's state or anomalies, in stream order; the SSE id is the sequence, and a reconnect with Last-Event-ID misses nothing.", role: "auditor",
		params: []param{pSpace, {name: "proposal", in: "query", typ: "string", desc: "Only this proposal."}, {name: "state", in: "query", typ: "string", desc: "Only changes into this state.", enum: states()},
			{name: "since_seq", in: "query", typ: "integer", desc: "Start after this sequence (Last-Event-ID wins when both are given); past the end of the log: 400."},
			{name: "Last-Event-ID", in: "header", typ: "string", desc: "The id of the last event received: the stream resumes after it; past the end of the log: 400."}, pMinSeq},
		responses: []resp{{status: 200, desc: "text/event-stream: `event: change` messages whose data is a Change (JSON); `event: holes` messages whose data is a HoleChange (seq, space, mew_space, opened, healed, holes: a MEW space's holes opened or healed; not sent with proposal or state); heartbeat comments.", media: "text/event-stream", schema: "Change"},
			errResp(400, "A parameter is unknown or malformed, or since_seq / Last-Event-ID is past the end of the log."), errResp(401, "No or a bad token."), errResp(403, "The token lacks the role."),
			errResp(429, "Too many streams open (too_many_streams), or the watch (a server wait) over the caller's share of waiting requests (too_many_holds): of this caller, or in all; Retry-After."), errResp(503, "min_seq not reached in time.")}},
	{method: "get", path: "/v1/changes", summary: "The change index as JSON pages (what /v1/watch streams), for charts and scripts.", role: "auditor",
		params: []param{pSpace, {name: "proposal", in: "query", typ: "string", desc: "Only this proposal."}, {name: "state", in: "query", typ: "string", desc: "Only changes into this state.", enum: states()},
			{name: "since_seq", in: "query", typ: "integer", desc: "Start after this sequence (the previous page's through); past the end of the log: 400."}, {name: "limit", in: "query", typ: "integer", desc: "Page size (1..1000, default 256)."}, pMinSeq},
		example:   "/v1/changes",
		responses: []resp{{status: 200, desc: "A page of changes: the proposals' changes with a sequence in (since_seq, through] and the space's hole changes in the same window (hole_changes: what /v1/watch sends as `event: holes`; none with proposal or state), each in stream order.", schema: "ChangesPage", example: true}, errResp(400, "A parameter is unknown or malformed, or since_seq is past the end of the log."), errResp(401, "No or a bad token."), errResp(403, "The token lacks the role."), errResp(429, "A min_seq wait over the caller's share of waiting requests (too_many_holds)."), errResp(503, "min_seq not reached in time.")}},
	{method: "get", path: "/ui/", summary: "The auditor's console (HTML, CSS and JavaScript embedded in the binary); it reads this API.",
		responses: []resp{{status: 200, desc: "The console.", media: "text/html"}}},
	{method: "post", path: "/mcp", summary: "The Model Context Protocol endpoint (streamable HTTP, docs/mcp.md): a JSON-RPC request, notification or response of an MCP client; answered as JSON or an event stream. Its read-only tools call this API with the caller's token.", role: "auditor",
		body: &reqBody{desc: "A JSON-RPC message of the Model Context Protocol.", content: map[string]string{"application/json": ""}},
		responses: []resp{{status: 200, desc: "The answer, as JSON or as an event stream.", media: "text/event-stream"}, {status: 202, desc: "A notification or response, accepted."}, errResp(401, "No or a bad token."), errResp(403, "The token lacks the auditor role."),
			errResp(404, "An Mcp-Session-Id this caller does not hold (another caller's, expired or never issued): session_not_found, nothing changed."),
			errResp(413, "The message is over the limit of 1 MiB (oversize)."),
			errResp(429, "Over the caller's or the server's MCP sessions (too_many_sessions), streams (too_many_streams) or waiting requests (too_many_holds); Retry-After.")}},
	{method: "get", path: "/mcp", summary: "The MCP session's stream of server notifications (resource updates), as Server-Sent Events.", role: "auditor",
		responses: []resp{{status: 200, desc: "The event stream.", media: "text/event-stream"}, errResp(401, "No or a bad token."), errResp(403, "The token lacks the auditor role."),
			errResp(404, "An Mcp-Session-Id this caller does not hold (session_not_found)."), errResp(429, "Too many streams open (too_many_streams); Retry-After.")}},
	{method: "delete", path: "/mcp", summary: "End an MCP session (header Mcp-Session-Id).", role: "auditor",
		responses: []resp{{status: 204, desc: "Ended."}, errResp(401, "No or a bad token."), errResp(403, "The token lacks the auditor role."),
			errResp(404, "An Mcp-Session-Id this caller does not hold (another caller's, expired or never issued): session_not_found, nothing changed.")}},
	{method: "get", path: "/v1/status", summary: "Both sides of the projection's lag.", role: "auditor",
		params: []param{pSpace, pMinSeq}, example: "/v1/status",
		responses: append([]resp{{status: 200, desc: "Stream and projection sequences.", schema: "Status", example: true}}, readErr...)},
	{method: "post", path: "/v1/events", summary: "Append one envelope, or many as NDJSON (one result per line, in order).", role: "writer",
		params: []param{pSpace, {name: "kernel", in: "query", typ: "string", desc: "1: take every body (or line) as a bare kernel proposal to wrap.", enum: []string{"1"}},
			{name: "Ledger-Bridge", in: "header", typ: "string", desc: "A bridge's session mark (contract §14): b=BRIDGE&m=MEW_SPACE&s=SESSION&r=RECEIVED_UNIX_NS, kept on every stored message of the request; the ledger derives each bridge's sessions from it (GET /v1/bridges). Taken only from a token allowed to record that bridge (role recorder; else 403 not_recorder), and not dated over a minute ahead of the ledger's clock (400 clock_ahead)."}},
		body: &reqBody{desc: "A MEW envelope (any accepted dialect), a bare kernel proposal, or NDJSON lines of them.", content: map[string]string{"application/json": "Envelope", "application/x-ndjson": ""}},
		responses: []resp{{status: 202, desc: "Stored (or recognised as a retry: duplicate true). NDJSON bodies get 200 with one AppendResult per line.", schema: "AppendResult", example: true},
			{status: 200, desc: "NDJSON: one AppendResult per input line, in order.", media: "application/x-ndjson", schema: "AppendResult"},
			errResp(400, "The envelope is refused: code and field say why."), errResp(401, "No or a bad token."), errResp(403, "The token lacks the writer role (forbidden), or a Ledger-Bridge mark names a bridge it may not record (not_recorder)."),
			errResp(413, "The body (an envelope, or an NDJSON body) is over the size limit (oversize; the message gives the limit)."), errResp(429, "Over the write limit (rate_limited), or the body is awaited over the caller's share of waiting requests (too_many_holds); Retry-After."),
			errResp(503, "Valid, but the stream did not acknowledge it (retrying is safe), or the disk is full (storage_full, Retry-After: answered at once while it lasts).")},
		example: "/v1/events", exampleBody: `{"protocol":"mew/v0.4","id":"doc-proposal","from":"doc-agent","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"read_file"}}}`},
	{method: "post", path: "/v1/ops/rebuild", summary: "Start an online rebuild: fold the stream again into a new store, then swap it in.", role: "ops",
		params: []param{{name: "wait", in: "query", typ: "string", desc: "1: answer when the rebuild ended.", enum: []string{"1"}}},
		responses: []resp{{status: 202, desc: "Started; poll GET /v1/ops/rebuild.", schema: "RebuildStatus"}, {status: 200, desc: "With wait=1: the rebuild ended.", schema: "RebuildStatus"}, errResp(409, "A rebuild is already running."), errResp(401, "No or a bad token."), errResp(403, "The token lacks the ops role."),
			errResp(503, "The ledger cannot rebuild (not_ready: the stream is gone or was recreated, ...; the message says what).")}},
	{method: "get", path: "/v1/ops/rebuild", summary: "The running or last rebuild.", role: "ops", example: "/v1/ops/rebuild",
		responses: []resp{{status: 200, desc: "Its status.", schema: "RebuildStatus", example: true}, errResp(401, "No or a bad token."), errResp(403, "The token lacks the ops role.")}},
	{method: "post", path: "/v1/ops/verify", summary: "Rebuild into a temporary store and compare it with the live projection.", role: "ops",
		responses: []resp{{status: 200, desc: "The comparison.", schema: "VerifyResult"}, errResp(401, "No or a bad token."), errResp(403, "The token lacks the ops role."), errResp(409, "Another operation is running."),
			errResp(503, "The stream did not answer, or the ledger cannot verify (not_ready: the stream is gone or was recreated, ...; the message says what).")}},
	{method: "get", path: "/v1/checkpoint", summary: "The latest checkpoint (contract §16): a C2SP tlog-checkpoint signed note (origin, tree size, root hash; Ed25519). With witnesses (serve --witness), the latest holding their quorum of C2SP tlog-cosignature lines.", role: "auditor",
		params: []param{{name: "unwitnessed", in: "query", typ: "string", desc: "1: the latest signed checkpoint, witnessed or not."}},
		responses: []resp{{status: 200, desc: "The signed note (with the witnesses' cosignatures it holds).", media: "text/plain"}, errResp(400, "unwitnessed is not 1 or 0, or a parameter is unknown."),
			errResp(401, "No or a bad token."), errResp(403, "The token lacks the role (a token limited to spaces may not read whole-log routes)."),
			errResp(503, "No checkpoint signed yet, or none holds the witnesses' quorum yet (no_checkpoint); retry after the checkpoint interval.")}},
	{method: "get", path: "/v1/checkpoint/key", summary: "The verifier key of the checkpoints (C2SP signed-note format, <origin>+<hash>+<base64>).", role: "auditor",
		responses: []resp{{status: 200, desc: "The key, one line.", media: "text/plain"}, errResp(401, "No or a bad token."), errResp(403, "The token lacks the role.")}},
	{method: "get", path: "/v1/checkpoints", summary: "Every checkpoint the ledger signed, by tree size, smallest first.", role: "auditor",
		params: []param{{name: "from", in: "query", typ: "integer", desc: "Only checkpoints of this tree size or larger (the previous page's next_from)."},
			{name: "limit", in: "query", typ: "integer", desc: "Page size (1..1000, default 100)."}},
		example:   "/v1/checkpoints",
		responses: []resp{{status: 200, desc: "A page of checkpoints.", schema: "CheckpointList", example: true}, errResp(400, "A parameter is unknown or malformed."), errResp(401, "No or a bad token."), errResp(403, "The token lacks the role.")}},
	{method: "get", path: "/v1/tile/{path}", summary: "The Merkle tree and its leaves in the C2SP tlog-tiles layout, immutable and cacheable: hash tile tile/<L>/<N>[.p/<W>] (height 8), or entry bundle tile/entries/<N>[.p/<W>] (the leaves of indexes 256·N.., each framed by a big-endian uint16 length; with framing=long by a uint32 one, for leaves over 65,535 bytes).", role: "auditor",
		params: []param{{name: "path", in: "path", typ: "string", desc: "<L>/<N>[.p/<W>] or entries/<N>[.p/<W>] as C2SP tlog-tiles names them (N in 3-digit groups, x-prefixed but the last).", required: true},
			{name: "framing", in: "query", typ: "string", desc: "Entry bundles only: long frames each leaf by a 4-byte length (a leaf can be up to about 1 MiB)."}},
		responses: []resp{{status: 200, desc: "The tile (W or 256 hashes of 32 bytes) or the entry bundle.", media: "application/octet-stream"}, errResp(400, "framing is not long, or a parameter is unknown."),
			errResp(404, "Not a tile or entry bundle path, or past the tree (beyond_tree)."), errResp(409, "An entry bundle holds a leaf over 65,535 bytes (entry_too_long): ask with framing=long; or a leaf of the bundle is damaged or missing in the log (log_damaged, with the damage: kind, seq, leaf hashes)."),
			errResp(401, "No or a bad token."), errResp(403, "The token lacks the role.")}},
	{method: "get", path: "/v1/proposals/{id}/proof", summary: "A proposal's evidence bundle: every event of its history in its original bytes, with its Merkle-tree leaf and inclusion proof against a signed checkpoint.", role: "auditor",
		params:  []param{pID, pSpace, {name: "size", in: "query", typ: "integer", desc: "Prove against the checkpoint of this tree size (events after it are left out); default the latest."}},
		example: "/v1/proposals/env-req-1/proof",
		responses: []resp{{status: 200, desc: "The bundle (check it with `ledger verify --bundle`).", schema: "Bundle", example: true}, errResp(400, "A parameter is unknown or malformed."),
			errResp(404, "No such proposal, or no checkpoint of that size (not_found), or one the tree has not reached (beyond_tree)."), errResp(401, "No or a bad token."), errResp(403, "The token lacks the role or the space."),
			errResp(409, "The history touches a damaged or missing sequence of the log, or the tree was rewritten (log_damaged, with the damage: kind, seq, leaf hashes)."),
			errResp(503, "No checkpoint covers the history yet (no_checkpoint): retry after the checkpoint interval.")}},
	{method: "get", path: "/v1/proof/consistency", summary: "An RFC 6962 consistency proof from the tree of from leaves to the tree of to leaves.", role: "auditor",
		params:  []param{{name: "from", in: "query", typ: "integer", desc: "The older tree size.", required: true}, {name: "to", in: "query", typ: "integer", desc: "The newer tree size (at most the tree's).", required: true}},
		example: "/v1/proof/consistency?from=1&to=3",
		responses: []resp{{status: 200, desc: "The proof.", schema: "ConsistencyProof", example: true}, errResp(400, "from or to missing or malformed, or from > to."),
			errResp(404, "to is past the tree (beyond_tree)."), errResp(401, "No or a bad token."), errResp(403, "The token lacks the role."),
			errResp(409, "The tree was rewritten: it no longer extends the checkpoints signed (log_damaged).")}},
	{method: "get", path: "/v1/proof/inclusion", summary: "The RFC 6962 inclusion proof of one stream sequence's leaf, against a signed checkpoint (included).", role: "auditor",
		params: []param{{name: "seq", in: "query", typ: "integer", desc: "The stream sequence (leaf seq-1).", required: true},
			{name: "size", in: "query", typ: "integer", desc: "Prove against the checkpoint of this tree size; default the latest."}},
		example: "/v1/proof/inclusion?seq=2",
		responses: []resp{{status: 200, desc: "The proof, the leaf hash and the checkpoint.", schema: "InclusionProof", example: true}, errResp(400, "seq missing or malformed."),
			errResp(404, "seq beyond the log (not_found), no checkpoint of that size, or seq past it (beyond_tree)."), errResp(401, "No or a bad token."), errResp(403, "The token lacks the role."),
			errResp(409, "seq is the damaged or missing sequence of the log, or the tree was rewritten (log_damaged)."),
			errResp(503, "No checkpoint covers seq yet (no_checkpoint).")}},
	{method: "get", path: "/healthz", summary: "Liveness: the process serves.", example: "/healthz",
		responses: []resp{{status: 200, desc: "Serving.", schema: "Health", example: true}}},
	{method: "get", path: "/readyz", summary: "Readiness: the projection is caught up within the ready bound.", example: "/readyz",
		responses: []resp{{status: 200, desc: "Ready.", schema: "Ready", example: true}, {status: 503, desc: "Behind the stream, or the stream did not answer.", schema: "Ready"}}},
	{method: "get", path: "/metrics", summary: "Prometheus metrics.", role: "metrics",
		responses: []resp{{status: 200, desc: "The exposition format.", media: "text/plain"}}},
	{method: "get", path: "/openapi.json", summary: "This document.",
		responses: []resp{{status: 200, desc: "The OpenAPI 3.1 description of every route.", schema: "OpenAPI"}}},
}

// schemaTypes are the component schemas reflected from Go types.
var schemaTypes = map[string]reflect.Type{
	"Proposal":      reflect.TypeFor[api.Proposal](),
	"History":       reflect.TypeFor[api.History](),
	"List":          reflect.TypeFor[api.List](),
	"Stats":         reflect.TypeFor[api.Stats](),
	"Status":        reflect.TypeFor[api.Status](),
	"Ready":         reflect.TypeFor[api.Ready](),
	"Health":        reflect.TypeFor[api.Health](),
	"ErrorBody":     reflect.TypeFor[api.ErrorBody](),
	"RebuildStatus": reflect.TypeFor[api.RebuildStatus](),
	"VerifyResult":  reflect.TypeFor[api.VerifyResult](),
	"Gaps":          reflect.TypeFor[api.Gaps](),
	"Bridges":       reflect.TypeFor[api.Bridges](),
	"Holes":         reflect.TypeFor[api.Holes](),
	"GapReport":     reflect.TypeFor[ledger.Gap](),
	"Change":        reflect.TypeFor[api.Change](),
	"EventPage":     reflect.TypeFor[api.EventPage](),
	"RawEvent":      reflect.TypeFor[api.RawEvent](),
	"ChangesPage":   reflect.TypeFor[httpapi.ChangesPage](),
	// contract §16 (client/evidence's types).
	"Bundle":           reflect.TypeFor[evidence.Bundle](),
	"ConsistencyProof": reflect.TypeFor[evidence.ConsistencyProof](),
	"CheckpointList":   reflect.TypeFor[evidence.CheckpointList](),
	"InclusionProof":   reflect.TypeFor[evidence.InclusionProof](),
}

// schemaNames names the components whose Go names collide.
var schemaNames = map[reflect.Type]string{reflect.TypeFor[ledger.Gap](): "GapReport"}

// enums of named string types.
var enums = map[reflect.Type][]string{
	reflect.TypeFor[api.ProposalState](): states(),
	reflect.TypeFor[api.Effect](): {string(api.EffectApplied), string(api.EffectRecorded), string(api.EffectDuplicate),
		string(api.EffectLate), string(api.EffectUnauthorized), string(api.EffectInvalid), string(api.EffectOrphan), string(api.EffectIgnored)},
}

// reflector turns Go types into JSON Schema 2020-12 (OpenAPI 3.1) the way
// encoding/json encodes them: exported fields by their json names,
// omitempty/omitzero members optional and the others required, no other
// members allowed; named structs become components.
type reflector struct{ defs map[string]any }

func (r *reflector) schema(t reflect.Type) any {
	switch t {
	case reflect.TypeFor[time.Time]():
		return map[string]any{"type": "string", "format": "date-time"}
	case reflect.TypeFor[json.RawMessage]():
		return map[string]any{"description": "Any JSON value, as sent."}
	}
	if vals, ok := enums[t]; ok {
		return map[string]any{"type": "string", "enum": vals}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return r.schema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": r.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": r.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := t.Name()
		if n, ok := schemaNames[t]; ok {
			name = n
		}
		if name == "" {
			return r.object(t)
		}
		if _, done := r.defs[name]; !done {
			r.defs[name] = nil // recursion guard
			r.defs[name] = r.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic(fmt.Sprintf("openapi: no schema for %v", t))
}

func (r *reflector) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				walk(ft)
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = r.schema(f.Type)
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
				required = append(required, name)
			}
		}
	}
	walk(t)
	sort.Strings(required)
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

// buildDocument returns the document; examples maps "METHOD path status"
// to the example body.
func buildDocument(examples map[string]any) map[string]any {
	r := &reflector{defs: map[string]any{}}
	for name, t := range schemaTypes {
		r.schema(t)
		if _, ok := r.defs[name]; !ok {
			panic("openapi: schema name " + name + " is not the Go type's name")
		}
	}
	// AppendResult has its own MarshalJSON: an ack, or a refusal.
	r.defs["AppendResult"] = map[string]any{
		"description": "The result of one append: an acknowledgement, or a refusal (line is the NDJSON line number, from 1).",
		"oneOf": []any{
			map[string]any{"type": "object", "additionalProperties": false, "required": []string{"duplicate", "seq"},
				"properties": map[string]any{"line": map[string]any{"type": "integer"}, "id": map[string]any{"type": "string"}, "seq": map[string]any{"type": "integer"}, "duplicate": map[string]any{"type": "boolean"}}},
			map[string]any{"type": "object", "additionalProperties": false, "required": []string{"error"},
				"properties": map[string]any{"line": map[string]any{"type": "integer"}, "error": map[string]any{"$ref": "#/components/schemas/Error"}}},
		},
	}
	r.defs["Envelope"] = map[string]any{
		"description": "A lifecycle envelope (MEW v0.4 canonical form; the other dialects of the README are accepted too).",
		"type":        "object", "required": []string{"id", "from", "kind"},
		"properties": map[string]any{
			"protocol": map[string]any{"type": "string"}, "id": map[string]any{"type": "string"}, "ts": map[string]any{"type": "string"},
			"from": map[string]any{"type": "string"}, "to": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"kind": map[string]any{"type": "string"}, "correlation_id": map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
			"context": map[string]any{"type": "string"}, "payload": map[string]any{"type": "object"},
		},
	}
	r.defs["OpenAPI"] = map[string]any{"type": "object", "required": []string{"openapi", "paths"}}

	paths := map[string]any{}
	for _, o := range operations {
		item, _ := paths[o.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[o.path] = item
		}
		var params []any
		for _, p := range o.params {
			s := map[string]any{"type": p.typ}
			if len(p.enum) > 0 {
				s["enum"] = p.enum
			}
			params = append(params, map[string]any{"name": p.name, "in": p.in, "description": p.desc, "required": p.required, "schema": s})
		}
		responses := map[string]any{}
		for _, rs := range o.responses {
			ans := map[string]any{"description": rs.desc}
			media := rs.media
			if media == "" {
				media = "application/json"
			}
			if rs.schema != "" || rs.media != "" {
				c := map[string]any{}
				if rs.schema != "" {
					c["schema"] = map[string]any{"$ref": "#/components/schemas/" + rs.schema}
				}
				if rs.example {
					if ex, ok := examples[exampleKey(o, rs.status)]; ok {
						c["example"] = ex
					}
				}
				ans["content"] = map[string]any{media: c}
			}
			responses[fmt.Sprint(rs.status)] = ans
		}
		// Every path answers a method it does not take with 405
		// method_not_allowed and an Allow header.
		responses["405"] = map[string]any{"description": "Not a method of this path: the Allow header lists those it takes.",
			"headers": map[string]any{"Allow": map[string]any{"description": "The methods of this path.", "schema": map[string]any{"type": "string"}}},
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/ErrorBody"}}}}
		operation := map[string]any{"summary": o.summary, "responses": responses, "operationId": operationID(o)}
		if len(params) > 0 {
			operation["parameters"] = params
		}
		if o.body != nil {
			content := map[string]any{}
			for media, schema := range o.body.content {
				if schema == "" {
					content[media] = map[string]any{"schema": map[string]any{"type": "string", "description": "One JSON value per line."}}
				} else {
					content[media] = map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + schema}}
				}
			}
			operation["requestBody"] = map[string]any{"description": o.body.desc, "required": true, "content": content}
		}
		if o.role == "" {
			operation["security"] = []any{}
		} else {
			operation["x-ledger-role"] = o.role
		}
		item[o.method] = operation
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "mewledger — the proposal ledger", "version": "1",
			"license": map[string]any{"name": "Apache License 2.0", "identifier": "Apache-2.0"},
			"description": "The HTTP API of `ledger serve`: audit queries over the projection, and the HTTP append path. " +
				"Every error is {\"error\":{\"code\",\"message\",\"field\"}}. With --auth, every route but the probes and this document takes a bearer token; " +
				"x-ledger-role names the role a token needs (auditor, writer, recorder, ops, metrics). docs/api.md explains each route in words."},
		"servers":    []any{map[string]any{"url": "http://127.0.0.1:8080"}},
		"security":   []any{map[string]any{"bearer": []any{}}},
		"paths":      paths,
		"components": map[string]any{"schemas": r.defs, "securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "A token from the --auth file."}}},
	}
}

func operationID(o op) string {
	id := o.method
	for _, part := range strings.Split(strings.Trim(o.path, "/"), "/") {
		part = strings.Trim(part, "{}")
		part = strings.ReplaceAll(strings.ReplaceAll(part, ".", "_"), "-", "_")
		id += "_" + part
	}
	return id
}

func exampleKey(o op, status int) string { return fmt.Sprintf("%s %s %d", o.method, o.path, status) }

// liveAnswers starts a real ledger, appends the walkthrough's envelopes
// and asks every operation's example request. It returns the answers by
// exampleKey, and the API's mounted routes.
func liveAnswers(t *testing.T) (map[string]any, map[string][]byte, []string) {
	l := start(t)
	var last uint64
	for _, env := range []string{
		`{"protocol":"mew/v0.4","id":"env-req-1","from":"untrusted-agent","to":["target-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"config.json","content":"{}"}}}}`,
		`{"protocol":"mew/v0.4","id":"env-fulfill-1","from":"human-user","to":["target-agent"],"kind":"mcp/request","correlation_id":["env-req-1"],"payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"config.json","content":"{}"}}}}`,
		`{"protocol":"mew/v0.4","id":"env-resp-1","from":"target-agent","to":["human-user"],"kind":"mcp/response","correlation_id":["env-fulfill-1"],"payload":{"result":{"content":[{"type":"text","text":"ok"}]}}}`,
		`{"protocol":"mew/v0.4","id":"env-req-2","from":"untrusted-agent","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc"}}}}`,
		`{"protocol":"mew/v0.4","id":"reject-789","from":"fs-agent","kind":"mcp/reject","correlation_id":["env-req-2"],"payload":{"reason":"unsafe"}}`,
		`{"protocol":"mew/v0.4","id":"chat-1","from":"fs-agent","kind":"chat","correlation_id":["reject-789"],"payload":{"text":"deleting /etc would break the host"}}`,
	} {
		l.post(env)
	}
	// A bridge's gap report, so that GET /v1/gaps has one to show.
	if st, _, body := l.do(http.MethodPost, "/v1/gaps", "application/json", []byte(`{"bridge":"ledger-recorder","mew_space":"demo","gateway":"ws://127.0.0.1:8090",`+
		`"last_envelope":"env-resp-1","disconnected_at":"2026-01-02T03:04:05Z","reconnected_at":"2026-01-02T03:04:09Z","reason":"read: EOF"}`)); st != http.StatusAccepted {
		t.Fatalf("POST /v1/gaps: %d %s", st, body)
	} else {
		var r api.AppendResult
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		last = r.Seq
	}
	examples := map[string]any{}
	raws := map[string][]byte{}
	for _, o := range operations {
		if o.example == "" {
			continue
		}
		method := strings.ToUpper(o.method)
		path := o.example
		takesMinSeq := false
		for _, p := range o.params {
			takesMinSeq = takesMinSeq || p.name == "min_seq"
		}
		if method == http.MethodGet && takesMinSeq {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			path += fmt.Sprintf("%smin_seq=%d", sep, last)
		}
		if o.path == "/readyz" {
			// /readyz lags the last append until the projection has
			// applied it: a min_seq read waits for that.
			if st, _, b := l.do(http.MethodGet, fmt.Sprintf("/v1/stats?min_seq=%d", last), "", nil); st != http.StatusOK {
				t.Fatalf("waiting for seq %d: %d %s", last, st, b)
			}
		}
		status, _, body := l.do(method, path, "application/json", []byte(o.exampleBody))
		want := o.responses[0].status
		if status != want {
			t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, body)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, body)
		}
		examples[exampleKey(o, want)] = v
		raws[exampleKey(o, want)] = body
	}
	return examples, raws, l.app.API().Routes()
}

func TestOpenAPIDocument(t *testing.T) {
	examples, raws, routes := liveAnswers(t)
	generated := buildDocument(examples)
	out, err := json.MarshalIndent(generated, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	if *update {
		if err := os.WriteFile("openapi.json", out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote openapi.json (%d bytes)", len(out))
	}
	committedRaw := httpapi.OpenAPI()
	var committed map[string]any
	if err := json.Unmarshal(committedRaw, &committed); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}

	// 1. Every mounted route is described, and every described one mounted.
	described := map[string]bool{}
	for _, o := range operations {
		described[strings.ToUpper(o.method)+" "+o.path] = true
	}
	for _, r := range routes {
		// A wildcard of the rest of the path ({path...}) is one path
		// parameter in OpenAPI.
		r = strings.ReplaceAll(r, "...}", "}")
		if !described[r] {
			t.Errorf("route %q is mounted but not described in the OpenAPI document (add it to operations in openapi_test.go, then run go test ./internal/server/api -run TestOpenAPIDocument -update)", r)
		}
		delete(described, r)
	}
	for r := range described {
		t.Errorf("the OpenAPI document describes %q, which the API does not mount", r)
	}

	// 2. The committed document is the generated one, examples aside.
	var gen map[string]any
	if err := json.Unmarshal(out, &gen); err != nil {
		t.Fatal(err)
	}
	if a, b := stripExamples(committed), stripExamples(gen); !reflect.DeepEqual(a, b) {
		ja, _ := json.MarshalIndent(a, "", " ")
		jb, _ := json.MarshalIndent(b, "", " ")
		t.Errorf("openapi.json is stale: regenerate it with go test ./internal/server/api -run TestOpenAPIDocument -update\n%s", firstDiff(string(ja), string(jb)))
	}

	// 3. Live answers validate against their schemas, and the documented
	// examples have the live answers' shape.
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(committedRaw))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("mem:///openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	for _, o := range operations {
		for _, rs := range o.responses {
			key := exampleKey(o, rs.status)
			raw, ok := raws[key]
			if !ok || rs.schema == "" {
				continue
			}
			sch, err := c.Compile("mem:///openapi.json#/components/schemas/" + rs.schema)
			if err != nil {
				t.Fatalf("schema %s: %v", rs.schema, err)
			}
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Errorf("%s: the live answer does not match schema %s: %v\n%s", key, rs.schema, err, raw)
			}
			documented := committedExample(committed, o, rs.status)
			if documented == nil {
				t.Errorf("%s: no documented example (regenerate with -update)", key)
				continue
			}
			if a, b := shape(documented, ""), shape(examples[key], ""); !reflect.DeepEqual(a, b) {
				t.Errorf("%s: the documented example's shape differs from the live answer's (regenerate with -update):\ndocumented %v\nlive       %v", key, a, b)
			}
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	l := start(t)
	status, h, body := l.do(http.MethodGet, "/openapi.json", "", nil)
	if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /openapi.json: %d %s", status, h.Get("Content-Type"))
	}
	if !bytes.Equal(body, httpapi.OpenAPI()) {
		t.Fatal("GET /openapi.json is not the embedded document")
	}
	var d struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(body, &d); err != nil || d.OpenAPI != "3.1.0" || d.Paths["/v1/proposals/{id}"] == nil {
		t.Fatalf("document: %v %q", err, d.OpenAPI)
	}
}

func stripExamples(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k == "example" {
				continue
			}
			out[k] = stripExamples(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = stripExamples(e)
		}
		return out
	}
	return v
}

func committedExample(doc map[string]any, o op, status int) any {
	get := func(v any, k string) any {
		m, _ := v.(map[string]any)
		return m[k]
	}
	v := get(get(get(get(get(get(get(doc, "paths"), o.path), o.method), "responses"), fmt.Sprint(status)), "content"), "application/json")
	return get(v, "example")
}

// shape lists every member path of v with its JSON type ("proposals[].id
// string"); array elements are merged. Values are ignored.
func shape(v any, at string) []string {
	set := map[string]bool{}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			set[at+" object"] = true
			for k, e := range x {
				walk(e, at+"."+k)
			}
		case []any:
			set[at+" array"] = true
			for _, e := range x {
				walk(e, at+"[]")
			}
		case string:
			set[at+" string"] = true
		case float64:
			set[at+" number"] = true
		case bool:
			set[at+" boolean"] = true
		case nil:
			set[at+" null"] = true
		}
	}
	walk(v, at)
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			lo := max(0, i-3)
			return fmt.Sprintf("at line %d:\ncommitted: %s\ngenerated: %s", i+1, strings.Join(la[lo:min(len(la), i+3)], "\n"), strings.Join(lb[lo:min(len(lb), i+3)], "\n"))
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(la), len(lb))
}

// TestOpenAPIMethodsConflictsLicense: the document carries the repository's
// license (LICENSE: Apache-2.0), documents 405 on every operation — and a
// live ledger answers a method a path does not take with 405 and Allow —
// and 409 on the operations whose handlers answer it (ErrBusy).
func TestOpenAPIMethodsConflictsLicense(t *testing.T) {
	var doc struct {
		Info struct {
			License struct{ Name, Identifier string }
		}
		Paths map[string]map[string]struct {
			Responses map[string]any
		}
	}
	if err := json.Unmarshal(httpapi.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	lic, err := os.ReadFile("../../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Info.License.Identifier != "Apache-2.0" || !strings.Contains(string(lic), "Apache License") || !strings.Contains(string(lic), "Version 2.0") {
		t.Errorf("info.license %+v; LICENSE starts %q", doc.Info.License, string(lic[:80]))
	}
	l := start(t)
	for path, item := range doc.Paths {
		for method, o := range item {
			if _, ok := o.Responses["405"]; !ok {
				t.Errorf("%s %s: no 405 documented", method, path)
			}
		}
		if _, ok := item["delete"]; ok {
			continue
		}
		live := strings.ReplaceAll(path, "{id}", "env-req-1")
		st, hdr, body := l.do(http.MethodDelete, live, "", nil)
		if st != http.StatusMethodNotAllowed || !strings.Contains(string(body), "method_not_allowed") || hdr.Get("Allow") == "" {
			t.Errorf("DELETE %s: %d %v %s, want 405 method_not_allowed with Allow", live, st, hdr, body)
		}
	}
	for _, p := range []string{"/v1/ops/rebuild", "/v1/ops/verify"} {
		if _, ok := doc.Paths[p]["post"].Responses["409"]; !ok {
			t.Errorf("POST %s: 409 busy not documented", p)
		}
	}
}
