package evidence

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// MaxCheckpointBytes bounds a signed checkpoint OpenCheckpoint accepts.
const MaxCheckpointBytes = 1 << 20

// Checkpoint is a tree head: the log it belongs to, its size and its root
// hash, in the C2SP tlog-checkpoint format.
type Checkpoint struct {
	// Origin names the log: the first line of the note, and the name of
	// the key that signs it.
	Origin string
	// Size is the number of leaves.
	Size int64
	// Hash is the root hash of the tree of Size leaves (RFC 6962).
	Hash tlog.Hash
	// Extensions are optional further lines of the body, each without its
	// newline (the ledger writes none; parsed ones are kept so that a
	// checkpoint round-trips).
	Extensions []string
}

// Tree returns the checkpoint's tree head as tlog's Tree.
func (c Checkpoint) Tree() tlog.Tree { return tlog.Tree{N: c.Size, Hash: c.Hash} }

// String returns a one-line summary, "origin@size:hash".
func (c Checkpoint) String() string { return fmt.Sprintf("%s@%d:%s", c.Origin, c.Size, c.Hash) }

// Text returns the note body:
//
//	<origin>\n<size>\n<base64 root hash>\n[<extension>\n...]
//
// It fails, wrapping ErrMalformed, for an origin or extension that is
// empty, holds a newline or a control character, or a negative size.
func (c Checkpoint) Text() (string, error) {
	if err := checkLine("origin", c.Origin); err != nil {
		return "", err
	}
	if c.Size < 0 {
		return "", fmt.Errorf("%w: checkpoint: negative size %d", ErrMalformed, c.Size)
	}
	var b strings.Builder
	b.WriteString(c.Origin)
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(c.Size, 10))
	b.WriteByte('\n')
	b.WriteString(base64.StdEncoding.EncodeToString(c.Hash[:]))
	b.WriteByte('\n')
	for _, e := range c.Extensions {
		if err := checkLine("extension line", e); err != nil {
			return "", err
		}
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

func checkLine(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: checkpoint: empty %s", ErrMalformed, what)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: checkpoint: %s is not UTF-8", ErrMalformed, what)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: checkpoint: %s %q holds a control character", ErrMalformed, what, s)
		}
	}
	return nil
}

// ParseCheckpointText parses a checkpoint note's body (without its
// signatures). The size must be decimal without leading zeros, the hash
// standard base64 of 32 bytes, every line non-empty and ended by a
// newline. An error wraps ErrMalformed.
func ParseCheckpointText(text string) (Checkpoint, error) {
	if !strings.HasSuffix(text, "\n") {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint: body does not end with a newline", ErrMalformed)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint: %d lines, want at least 3 (origin, size, hash)", ErrMalformed, len(lines))
	}
	c := Checkpoint{Origin: lines[0]}
	if err := checkLine("origin", c.Origin); err != nil {
		return Checkpoint{}, err
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint: size %q is not a canonical decimal", ErrMalformed, lines[1])
	}
	c.Size = size
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint: root hash %q is not base64 of %d bytes", ErrMalformed, lines[2], tlog.HashSize)
	}
	copy(c.Hash[:], h)
	for _, e := range lines[3:] {
		if err := checkLine("extension line", e); err != nil {
			return Checkpoint{}, err
		}
		c.Extensions = append(c.Extensions, e)
	}
	return c, nil
}

// GenerateKey makes a new Ed25519 signing key for the log named origin,
// reading randomness from rand. It returns the signer key (secret:
// "PRIVATE+KEY+<origin>+<key hash>+<base64>") and the verifier key
// ("<origin>+<key hash>+<base64>"), both in the C2SP signed-note format.
// origin must be a valid note key name: non-empty, no spaces, no '+'.
func GenerateKey(rand io.Reader, origin string) (signerKey, verifierKey string, err error) {
	if err := checkLine("origin", origin); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrKey, err)
	}
	if strings.ContainsAny(origin, " +") {
		return "", "", fmt.Errorf("%w: origin %q: a key name holds no space and no '+'", ErrKey, origin)
	}
	skey, vkey, err := note.GenerateKey(rand, origin)
	if err != nil {
		return "", "", fmt.Errorf("%w: origin %q: %v", ErrKey, origin, err)
	}
	return skey, vkey, nil
}

// NewSigner parses a signer key (GenerateKey's first result; surrounding
// white space is ignored). An error wraps ErrKey and never repeats the
// key.
func NewSigner(signerKey string) (note.Signer, error) {
	s, err := note.NewSigner(strings.TrimSpace(signerKey))
	if err != nil {
		return nil, fmt.Errorf("%w: signer key does not parse", ErrKey)
	}
	return s, nil
}

// NewVerifier parses a verifier key (GenerateKey's second result;
// surrounding white space is ignored). An error wraps ErrKey.
func NewVerifier(verifierKey string) (note.Verifier, error) {
	v, err := note.NewVerifier(strings.TrimSpace(verifierKey))
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key %q does not parse: %v", ErrKey, verifierKey, err)
	}
	return v, nil
}

// VerifierKeyOf returns the verifier key of a signer key.
func VerifierKeyOf(signerKey string) (string, error) {
	// PRIVATE+KEY+<name>+<hash>+<base64(alg ‖ seed)>: the verifier key is
	// derived by note from the Ed25519 seed.
	rest, ok := strings.CutPrefix(strings.TrimSpace(signerKey), "PRIVATE+KEY+")
	if !ok {
		return "", fmt.Errorf("%w: signer key does not parse", ErrKey)
	}
	// A key name holds no '+'; the base64 key may.
	name, rest, ok1 := strings.Cut(rest, "+")
	_, b64, ok2 := strings.Cut(rest, "+")
	key, err := base64.StdEncoding.DecodeString(b64)
	if !ok1 || !ok2 || err != nil || len(key) != 1+32 || key[0] != 1 {
		return "", fmt.Errorf("%w: signer key does not parse", ErrKey)
	}
	if _, err := note.NewSigner(strings.TrimSpace(signerKey)); err != nil {
		return "", fmt.Errorf("%w: signer key does not parse", ErrKey)
	}
	vkey, err := note.NewEd25519VerifierKey(name, ed25519Public(key[1:]))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrKey, err)
	}
	return vkey, nil
}

// SignCheckpoint returns the signed note of c, signed by every signer (at
// least one). Signers whose name is not c.Origin are cosigners (another
// ledger process, a witness): their signatures follow.
func SignCheckpoint(c Checkpoint, signers ...note.Signer) ([]byte, error) {
	if len(signers) == 0 {
		return nil, fmt.Errorf("%w: no signer", ErrKey)
	}
	text, err := c.Text()
	if err != nil {
		return nil, err
	}
	msg, err := note.Sign(&note.Note{Text: text}, signers...)
	if err != nil {
		return nil, fmt.Errorf("%w: sign checkpoint %s: %v", ErrKey, c, err)
	}
	return msg, nil
}

// Cosign adds signer's signature to a signed checkpoint that verifier
// (the log's key) verifies, keeping the signatures it carries: several
// ledger processes folding the same stream reach the same tree heads,
// and each can add its signature to the others' notes.
func Cosign(signed []byte, verifier note.Verifier, signer note.Signer) ([]byte, error) {
	_, n, err := OpenCheckpoint(signed, verifier)
	if err != nil {
		return nil, err
	}
	n.Sigs = append(n.Sigs, n.UnverifiedSigs...)
	n.UnverifiedSigs = nil
	msg, err := note.Sign(n, signer)
	if err != nil {
		return nil, fmt.Errorf("%w: cosign: %v", ErrKey, err)
	}
	return msg, nil
}

// OpenCheckpoint checks a signed checkpoint against the log's verifier
// key and parses it. It fails wrapping ErrMalformed (not a signed note, a
// body that is not a checkpoint, over MaxCheckpointBytes), ErrSignature
// (no valid signature by the verifier's key) or ErrOrigin (the origin line
// is not the key's name). Signatures of other keys are kept in the
// returned note's UnverifiedSigs.
func OpenCheckpoint(signed []byte, verifier note.Verifier) (Checkpoint, *note.Note, error) {
	if len(signed) > MaxCheckpointBytes {
		return Checkpoint{}, nil, fmt.Errorf("%w: checkpoint of %d bytes, over %d", ErrMalformed, len(signed), MaxCheckpointBytes)
	}
	n, err := note.Open(signed, note.VerifierList(verifier))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return Checkpoint{}, nil, fmt.Errorf("%w: checkpoint carries no signature by %s+%08x", ErrSignature, verifier.Name(), verifier.KeyHash())
		case errors.As(err, &invalid):
			return Checkpoint{}, nil, fmt.Errorf("%w: %v", ErrSignature, err)
		default:
			return Checkpoint{}, nil, fmt.Errorf("%w: signed note: %v", ErrMalformed, err)
		}
	}
	c, err := ParseCheckpointText(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.Origin != verifier.Name() {
		return Checkpoint{}, nil, fmt.Errorf("%w: checkpoint of %q, the key is %q's", ErrOrigin, c.Origin, verifier.Name())
	}
	return c, n, nil
}

// ParseUnverified parses a signed checkpoint without checking any
// signature (to show what a file holds before it is trusted). Its result
// must not be trusted.
func ParseUnverified(signed []byte) (Checkpoint, error) {
	if len(signed) > MaxCheckpointBytes {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint of %d bytes, over %d", ErrMalformed, len(signed), MaxCheckpointBytes)
	}
	i := bytes.LastIndex(signed, []byte("\n\n"))
	if i < 0 {
		return Checkpoint{}, fmt.Errorf("%w: not a signed note (no blank line before the signatures)", ErrMalformed)
	}
	return ParseCheckpointText(string(signed[:i+1]))
}
