package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/ops/archive"
)

// verifyBundle is `ledger verify --bundle FILE --key KEY`: it checks an
// evidence bundle (`ledger proof`) with nothing but the verifier key: no
// server, no data directory. KEY is the verifier key itself or a file
// holding it. The result goes to stdout as JSON; a bundle that does not
// verify is an error naming what failed (signature, inclusion, leaf
// encoding, mismatch), exit status 1.
func verifyBundle(e env, path, key string, w evidence.Witnesses) error {
	if key == "" {
		return usageError("--bundle needs --key VERIFIERKEY (the key `ledger checkpoint key` prints, or a file holding it)")
	}
	vkey, err := verifierKeyArg(key)
	if err != nil {
		return err
	}
	in := e.stdin
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		defer fh.Close()
		in = fh
	}
	b, err := evidence.ReadBundle(in)
	if err == nil {
		var v *evidence.Verified
		if v, err = evidence.VerifyBundleWitnessed(b, vkey, w); err == nil {
			return writeOpsJSON(e.stdout, bundleReport(b, v))
		}
	}
	_ = writeOpsJSON(e.stdout, struct {
		OK       bool     `json:"ok"`
		Failed   []string `json:"failed"`
		Failures []string `json:"failures"`
	}{false, failedKinds(err), strings.Split(err.Error(), "\n")})
	return fmt.Errorf("%s: %w", path, err)
}

// verifierKeyArg returns KEY when it parses as a verifier key, else the
// content of the file KEY names.
func verifierKeyArg(key string) (string, error) {
	if _, err := evidence.NewVerifier(key); err == nil {
		return key, nil
	}
	fh, err := os.Open(key)
	if err != nil {
		return "", usageError("--key %q is neither a verifier key (<origin>+<hash>+<base64>) nor a readable file", key)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, 4096))
	if err != nil {
		return "", fmt.Errorf("%w", err)
	}
	k := strings.TrimSpace(string(b))
	if _, err := evidence.NewVerifier(k); err != nil {
		return "", usageError("--key %s: %v", key, err)
	}
	return k, nil
}

// failedKinds names the kinds of failure err holds.
func failedKinds(err error) []string {
	out := []string{}
	for _, k := range []struct {
		name string
		err  error
	}{
		{"malformed", evidence.ErrMalformed}, {"key", evidence.ErrKey}, {"signature", evidence.ErrSignature},
		{"origin", evidence.ErrOrigin}, {"leaf_encoding", evidence.ErrLeafEncoding},
		{"mismatch", evidence.ErrMismatch}, {"inclusion", evidence.ErrInclusion},
		{"witnesses", evidence.ErrNoQuorum},
	} {
		if errors.Is(err, k.err) {
			out = append(out, k.name)
		}
	}
	return out
}

type bundleEvent struct {
	Seq      uint64 `json:"seq"`
	Time     string `json:"time"`
	Subject  string `json:"subject"`
	MsgID    string `json:"msg_id,omitempty"`
	LeafHash string `json:"leaf_hash"`
}

func bundleReport(b *evidence.Bundle, v *evidence.Verified) any {
	evs := make([]bundleEvent, 0, len(v.Leaves))
	for _, l := range v.Leaves {
		h, _ := l.Hash()
		evs = append(evs, bundleEvent{Seq: l.Seq, Time: l.Time.UTC().Format(time.RFC3339Nano), Subject: l.Subject,
			MsgID: l.Header(evidence.HeaderMsgID), LeafHash: h.String()})
	}
	return struct {
		OK       bool          `json:"ok"`
		Origin   string        `json:"origin"`
		TreeSize int64         `json:"tree_size"`
		RootHash string        `json:"root_hash"`
		Space    string        `json:"space,omitempty"`
		Proposal string        `json:"proposal,omitempty"`
		Events   []bundleEvent `json:"events"`
		// Cosigners are the required witnesses that cosigned (--witness-key).
		Cosigners []string `json:"cosigners,omitempty"`
	}{true, v.Checkpoint.Origin, v.Checkpoint.Size, v.Checkpoint.Hash.String(), b.Space, b.Proposal, evs, v.Cosigners}
}

// verifyExportCheckpoint is `ledger verify --export FILE --checkpoint NOTE
// --key KEY`: the export's chain, and its first lines against the signed
// checkpoint's tree (archive.VerifyCheckpoint).
func verifyExportCheckpoint(e env, export string, in io.Reader, noteFile, key string) error {
	vkey, err := verifierKeyArg(key)
	if err != nil {
		return err
	}
	v, err := evidence.NewVerifier(vkey)
	if err != nil {
		return usageError("--key: %v", err)
	}
	note, err := os.ReadFile(noteFile)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	cp, _, err := evidence.OpenCheckpoint(note, v)
	if err != nil {
		return fmt.Errorf("%s: %w", noteFile, err)
	}
	sum, err := archive.VerifyCheckpoint(in, cp)
	out := struct {
		OK bool `json:"ok"`
		archive.Summary
		Checkpoint string `json:"checkpoint"`
		Error      string `json:"error,omitempty"`
	}{err == nil, sum, cp.String(), ""}
	if err != nil {
		out.Error = err.Error()
	}
	if werr := writeOpsJSON(e.stdout, out); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", export, err)
	}
	return nil
}
