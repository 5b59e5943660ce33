package evidence

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// Witnesses (contract §16): third parties that check each checkpoint
// extends the last one they saw (C2SP tlog-witness) and add a
// cosignature (C2SP tlog-cosignature, cosignature/v1) to the note. A
// verifier that requires witnesses accepts a checkpoint only when a
// quorum of the witness keys it trusts cosigned it.

// ErrNoQuorum: a checkpoint does not carry valid cosignatures by the
// quorum of witnesses a verifier requires (not cosigned yet, cosigned by
// other witnesses, or a cosignature that does not verify).
var ErrNoQuorum = errors.New("evidence: checkpoint lacks the witnesses' quorum")

// algCosignatureV1 is the signed-note key type of a cosignature/v1 key.
const algCosignatureV1 = 4

// NewWitnessVerifier parses a witness's verifier key: a C2SP
// tlog-cosignature key ("<name>+<hash>+<base64(0x04 ‖ Ed25519 public
// key)>", what litewitness prints) or a plain Ed25519 note key (type
// 0x01, a witness that signs the checkpoint text itself). An error wraps
// ErrKey.
func NewWitnessVerifier(vkey string) (note.Verifier, error) {
	vkey = strings.TrimSpace(vkey)
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, b64, ok2 := strings.Cut(rest, "+")
	key, err := base64.StdEncoding.DecodeString(b64)
	if !ok1 || !ok2 || err != nil || len(key) == 0 || len(hash16) != 8 || name == "" {
		return nil, fmt.Errorf("%w: witness key %q does not parse", ErrKey, vkey)
	}
	if key[0] != algCosignatureV1 {
		return NewVerifier(vkey)
	}
	hash, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil || len(key) != 1+ed25519.PublicKeySize || strings.ContainsAny(name, " +\n") {
		return nil, fmt.Errorf("%w: witness key %q does not parse", ErrKey, vkey)
	}
	if uint32(hash) != keyHash(name, key) {
		return nil, fmt.Errorf("%w: witness key %q: the key hash does not match", ErrKey, vkey)
	}
	return &cosigVerifier{name: name, hash: uint32(hash), key: ed25519.PublicKey(slices.Clone(key[1:]))}, nil
}

// keyHash is the signed-note key hash: the first 4 bytes of
// SHA-256(name ‖ "\n" ‖ type ‖ key).
func keyHash(name string, typedKey []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte("\n"))
	h.Write(typedKey)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// cosigVerifier verifies cosignature/v1 signatures: 8 bytes of big-endian
// Unix time t ‖ Ed25519 signature of "cosignature/v1\ntime <t>\n" ‖ the
// checkpoint body.
type cosigVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.hash }
func (v *cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	// The body signed must be a checkpoint (C2SP tlog-cosignature).
	if _, err := ParseCheckpointText(string(msg)); err != nil {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	m := make([]byte, 0, 40+len(msg))
	m = fmt.Appendf(m, "cosignature/v1\ntime %d\n", t)
	m = append(m, msg...)
	return ed25519.Verify(v.key, m, sig[8:])
}

// CosignatureTime returns the Unix time a cosignature/v1 signature line's
// witness states it signed at (the first 8 bytes after the key hash).
func CosignatureTime(sig note.Signature) (int64, error) {
	b, err := base64.StdEncoding.DecodeString(sig.Base64)
	if err != nil || len(b) != 4+8+ed25519.SignatureSize {
		return 0, fmt.Errorf("%w: not a cosignature/v1 signature", ErrMalformed)
	}
	return int64(binary.BigEndian.Uint64(b[4:])), nil
}

// Witnesses is what a verifier requires of a checkpoint: cosignatures by
// at least Quorum of Keys.
type Witnesses struct {
	// Keys are the witnesses' verifiers (NewWitnessVerifier).
	Keys []note.Verifier
	// Quorum is how many of Keys must have cosigned; 0 means all.
	Quorum int
}

// ParseWitnesses parses witness verifier keys and a quorum (0: all of
// them). An error wraps ErrKey (a key does not parse, a key given twice,
// a quorum over the number of keys).
func ParseWitnesses(vkeys []string, quorum int) (Witnesses, error) {
	w := Witnesses{Quorum: quorum}
	seen := map[string]bool{}
	for _, k := range vkeys {
		v, err := NewWitnessVerifier(k)
		if err != nil {
			return Witnesses{}, err
		}
		id := fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
		if seen[id] {
			return Witnesses{}, fmt.Errorf("%w: witness key %s given twice", ErrKey, id)
		}
		seen[id] = true
		w.Keys = append(w.Keys, v)
	}
	if quorum < 0 || quorum > len(w.Keys) {
		return Witnesses{}, fmt.Errorf("%w: a quorum of %d with %d witness keys", ErrKey, quorum, len(w.Keys))
	}
	return w, nil
}

// Need returns the number of cosignatures required: Quorum, or all keys
// when it is 0.
func (w Witnesses) Need() int {
	if w.Quorum == 0 {
		return len(w.Keys)
	}
	return w.Quorum
}

// Cosigners returns the names of the witnesses among w.Keys whose
// cosignature on the signed checkpoint verifies, in w.Keys' order. The
// log's own signature is not checked here (OpenCheckpoint does).
func (w Witnesses) Cosigners(signed []byte) ([]string, error) {
	if len(signed) > MaxCheckpointBytes {
		return nil, fmt.Errorf("%w: checkpoint of %d bytes, over %d", ErrMalformed, len(signed), MaxCheckpointBytes)
	}
	i := strings.LastIndex(string(signed), "\n\n")
	if i < 0 {
		return nil, fmt.Errorf("%w: not a signed note (no blank line before the signatures)", ErrMalformed)
	}
	text := signed[:i+1]
	var out []string
	for _, v := range w.Keys {
		for _, line := range strings.Split(string(signed[i+2:]), "\n") {
			if sigVerifies(v, text, line) {
				out = append(out, v.Name())
				break
			}
		}
	}
	return out, nil
}

// sigVerifies reports whether a note signature line is v's and verifies
// over text.
func sigVerifies(v note.Verifier, text []byte, line string) bool {
	rest, ok := strings.CutPrefix(line, "— ")
	if !ok {
		return false
	}
	name, b64, ok := strings.Cut(rest, " ")
	if !ok || name != v.Name() {
		return false
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sig) < 4 || binary.BigEndian.Uint32(sig) != v.KeyHash() {
		return false
	}
	return v.Verify(text, sig[4:])
}

// Check returns the cosigners (Cosigners) of a signed checkpoint, wrapping
// ErrNoQuorum when they are fewer than Need. With no keys it checks
// nothing.
func (w Witnesses) Check(signed []byte) ([]string, error) {
	if len(w.Keys) == 0 {
		return nil, nil
	}
	got, err := w.Cosigners(signed)
	if err != nil {
		return nil, err
	}
	if len(got) < w.Need() {
		var names []string
		for _, v := range w.Keys {
			names = append(names, v.Name())
		}
		return got, fmt.Errorf("%w: cosigned by %d of the %d required (%q cosigned, of %q)", ErrNoQuorum, len(got), w.Need(), got, names)
	}
	return got, nil
}

// AddSignatures returns the signed note with the signature lines of sigs
// (each "— <name> <base64>\n", as a witness answers) appended, leaving out
// lines it already carries. The text and existing lines are kept as they
// are. An error wraps ErrMalformed.
func AddSignatures(signed, sigs []byte) ([]byte, error) {
	i := strings.LastIndex(string(signed), "\n\n")
	if i < 0 || len(signed) == 0 || signed[len(signed)-1] != '\n' {
		return nil, fmt.Errorf("%w: not a signed note", ErrMalformed)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(signed[i+2:len(signed)-1]), "\n") {
		if id, ok := sigID(l); ok {
			have[id] = true
		}
	}
	out := slices.Clone(signed)
	for _, l := range strings.Split(strings.TrimSuffix(string(sigs), "\n"), "\n") {
		if l == "" {
			continue
		}
		id, ok := sigID(l)
		if !ok {
			return nil, fmt.Errorf("%w: %q is not a note signature line", ErrMalformed, l)
		}
		if have[id] {
			continue // a key signs a note once: the first signature stays
		}
		have[id] = true
		out = append(out, l...)
		out = append(out, '\n')
	}
	return out, nil
}

// sigID returns a signature line's key: its name and key hash.
func sigID(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "— ")
	name, b64, ok2 := strings.Cut(rest, " ")
	sig, err := base64.StdEncoding.DecodeString(b64)
	if !ok || !ok2 || name == "" || err != nil || len(sig) < 5 {
		return "", false
	}
	return fmt.Sprintf("%s+%08x", name, binary.BigEndian.Uint32(sig)), true
}

// SignatureLinesOf returns the lines of sigs (note signature lines, as a
// witness answers) that are v's and verify over the text of the signed
// note, each ended by a newline; nil when none does.
func SignatureLinesOf(signed, sigs []byte, v note.Verifier) []byte {
	i := strings.LastIndex(string(signed), "\n\n")
	if i < 0 {
		return nil
	}
	var out []byte
	for _, l := range strings.Split(string(sigs), "\n") {
		if sigVerifies(v, signed[:i+1], l) {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

// VerifyBundleWitnessed is VerifyBundle, and then requires the bundle's
// checkpoint to carry cosignatures by w's quorum (an error wrapping
// ErrNoQuorum otherwise). With no witness keys it is VerifyBundle.
func VerifyBundleWitnessed(b *Bundle, verifierKey string, w Witnesses) (*Verified, error) {
	v, err := VerifyBundle(b, verifierKey)
	if err != nil {
		return nil, err
	}
	if v.Cosigners, err = w.Check([]byte(b.Checkpoint)); err != nil {
		return nil, err
	}
	return v, nil
}
