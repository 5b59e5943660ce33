package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/mod/sumdb/note"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
)

// --- prove_proposal

// ProveIn are prove_proposal's arguments.
type ProveIn struct {
	ID    string `json:"id" jsonschema:"the proposal's id: every event filed under it is proven"`
	Space string `json:"space,omitempty" jsonschema:"the space (tenant) of the proposal; empty: the ledger's default space"`
	Size  int64  `json:"size,omitempty" jsonschema:"prove against the checkpoint the ledger signed at this tree size (the log as it was then: later events are left out; GET /v1/checkpoints lists them); 0: the latest checkpoint"`
}

// ProvedEvent is one event of a bundle, as the summary lists it.
type ProvedEvent struct {
	Seq       uint64 `json:"seq"`
	LeafIndex int64  `json:"leaf_index"`
	Time      string `json:"time"`
	Subject   string `json:"subject"`
	MsgID     string `json:"msg_id,omitempty"`
	LeafHash  string `json:"leaf_hash"`
	// ProofHashes is the length of its inclusion proof.
	ProofHashes int `json:"proof_hashes"`
}

// ProveOut is prove_proposal's structured result: a summary of the
// evidence bundle, which the result carries whole as an embedded resource
// (BundleURI, application/json, exactly as the ledger answered it).
type ProveOut struct {
	ID    string `json:"id"`
	Space string `json:"space"`
	// Format is the bundle's format tag (mewledger-evidence/v1).
	Format string `json:"format"`
	// Checkpoint is the signed note (C2SP tlog-checkpoint) the events are
	// proven against; Origin, TreeSize and RootHash are its lines.
	Checkpoint string `json:"checkpoint"`
	Origin     string `json:"origin"`
	TreeSize   int64  `json:"tree_size"`
	RootHash   string `json:"root_hash"`
	// KeyNames are the names of the keys whose signatures the checkpoint
	// carries: a verifier key of one of these names checks the bundle.
	KeyNames []string `json:"key_names"`
	// VerifierKey is the verifier key the ledger names as its own
	// (GET /v1/checkpoint/key), when the caller may read it: the recipient
	// of the bundle should hold one obtained another way.
	VerifierKey string `json:"verifier_key,omitempty"`
	// Events lists the proven events (the first MaxProofEvents of them:
	// Truncated says the bundle holds more); Count is the bundle's number.
	Events    []ProvedEvent `json:"events"`
	Count     int           `json:"count"`
	Truncated bool          `json:"truncated"`
	// BundleURI names the embedded resource holding the bundle;
	// BundleBytes is its length.
	BundleURI   string `json:"bundle_uri"`
	BundleBytes int    `json:"bundle_bytes"`
}

// ProofURI is the URI of the embedded bundle of proposal id in space
// against the checkpoint of tree size size.
func ProofURI(space, id string, size int64) string {
	return ProposalURI(space, id) + "/proof?size=" + strconv.FormatInt(size, 10)
}

func (s *Server) toolProveProposal() {
	addToolContent(s, "prove_proposal", "Prove a proposal's history",
		"The evidence bundle of a proposal's history: every event filed under the id, byte for byte, each with its Merkle leaf and inclusion proof against a checkpoint the ledger signed (C2SP tlog-checkpoint). Anyone holding the ledger's verifier key can check the bundle with no access to the ledger (ledger verify --bundle FILE --key KEY, or client/evidence's VerifyBundle). Answers a summary (the checkpoint, the signing key's name, the events' sequences and leaf hashes) and the bundle itself as an embedded resource (application/json) to save and hand over. A verified bundle proves the log holds these messages at these positions; it does not prove they are all of the proposal's events. Refused with not_found when nothing is filed under the id or no checkpoint has that size, no_checkpoint when no signed checkpoint covers the events yet (retry in a second).",
		func(ctx context.Context, in ProveIn) (*ProveOut, []sdk.Content, error) {
			if strings.TrimSpace(in.ID) == "" {
				return nil, nil, argError("id", "id is required: the proposal's envelope id")
			}
			if in.Size < 0 {
				return nil, nil, argError("size", "size must be a tree size (0: the latest checkpoint), not %d", in.Size)
			}
			q := url.Values{}
			if sp := cmpOr(in.Space, s.opts.Space); sp != "" {
				q.Set("space", sp)
			}
			if in.Size > 0 {
				q.Set("size", strconv.FormatInt(in.Size, 10))
			}
			var raw []byte
			if err := s.c.Do(ctx, http.MethodGet, "/v1/proposals/"+url.PathEscape(in.ID)+"/proof", q, nil, "", false, &raw); err != nil {
				return nil, nil, err
			}
			if len(raw) > MaxProofBytes {
				return nil, nil, &api.Error{Status: 413, Code: "too_large", Field: "id",
					Message: fmt.Sprintf("the bundle of %q is %d bytes, over the %d an MCP answer carries: save it with `ledger proof %s -f FILE`", in.ID, len(raw), MaxProofBytes, in.ID)}
			}
			b, err := evidence.ParseBundle(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("mcp: the ledger's bundle of %q: %w", in.ID, err)
			}
			cp, err := evidence.ParseUnverified([]byte(b.Checkpoint))
			if err != nil {
				return nil, nil, fmt.Errorf("mcp: the checkpoint of %q's bundle: %w", in.ID, err)
			}
			out := &ProveOut{ID: cmpOr(b.Proposal, in.ID), Space: b.Space, Format: b.Format, Checkpoint: b.Checkpoint,
				Origin: cp.Origin, TreeSize: b.TreeSize, RootHash: b.RootHash, KeyNames: keyNames(b.Checkpoint),
				Count: len(b.Events), BundleBytes: len(raw), Events: []ProvedEvent{}}
			out.BundleURI = ProofURI(out.Space, out.ID, out.TreeSize)
			for i, e := range b.Events {
				if i == MaxProofEvents {
					out.Truncated = true
					break
				}
				out.Events = append(out.Events, ProvedEvent{Seq: e.Seq, LeafIndex: e.LeafIndex, Time: e.Time, Subject: e.Subject,
					MsgID: e.Headers["Nats-Msg-Id"], LeafHash: e.LeafHash, ProofHashes: len(e.Proof)})
			}
			// The ledger's own verifier key, for convenience: a token
			// limited to spaces may not read it (a whole-log route).
			var key []byte
			var ae *api.Error
			switch err := s.c.Do(ctx, http.MethodGet, "/v1/checkpoint/key", nil, nil, "", false, &key); {
			case err == nil:
				out.VerifierKey = strings.TrimSpace(string(key))
			case !errors.As(err, &ae):
				return nil, nil, err
			}
			var t strings.Builder
			fmt.Fprintf(&t, "%d events of proposal %q in space %q proven against checkpoint %s@%d (root %s), signed by %s.",
				out.Count, out.ID, out.Space, out.Origin, out.TreeSize, out.RootHash, strings.Join(out.KeyNames, ", "))
			if out.VerifierKey != "" {
				fmt.Fprintf(&t, " The ledger's verifier key: %s.", out.VerifierKey)
			}
			fmt.Fprintf(&t, " The bundle (%d bytes) is the embedded resource %s: save it and check it with `ledger verify --bundle FILE --key KEY`.", out.BundleBytes, out.BundleURI)
			for _, e := range out.Events {
				fmt.Fprintf(&t, "\nseq %d %s %s leaf %s", e.Seq, e.Time, e.Subject, e.LeafHash)
			}
			if out.Truncated {
				fmt.Fprintf(&t, "\n(first %d of %d events listed; the bundle holds all)", MaxProofEvents, out.Count)
			}
			return out, []sdk.Content{
				&sdk.TextContent{Text: t.String()},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: out.BundleURI, MIMEType: "application/json", Text: string(raw)}},
			}, nil
		})
}

// keyNames are the names on a signed note's signature lines.
func keyNames(signed string) []string {
	names := []string{}
	_, err := note.Open([]byte(signed), note.VerifierList())
	var un *note.UnverifiedNoteError
	if errors.As(err, &un) {
		for _, sig := range un.Note.UnverifiedSigs {
			names = append(names, sig.Name)
		}
	}
	return names
}
