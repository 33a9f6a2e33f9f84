// Command notecheck reads a signed note on stdin and checks it with Go's own
// golang.org/x/mod/sumdb/note, and its witness cosignatures with a C2SP tlog-cosignature
// `cosignature/v1` check written here from the spec, so that test/tlog-go-interop.test.ts can
// hold Teamlog's notes to code nobody on the project wrote. It prints one JSON object.
//
//	notecheck -log <vkey> [-log <vkey>]... [-witness <vkey>]... < note
//	notecheck -sign <PRIVATE+KEY+...> < text      (prints note.Sign's signed note instead)
//
// Built in GOPATH mode (GO111MODULE=off) against Debian's golang-golang-x-mod-dev, so that it
// needs no network; it imports nothing else outside the standard library.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// keyList is a flag that may be given more than once.
type keyList []string

func (k *keyList) String() string     { return strings.Join(*k, ",") }
func (k *keyList) Set(v string) error { *k = append(*k, v); return nil }

type signature struct {
	Name   string `json:"name"`
	Hash   string `json:"hash"`
	Base64 string `json:"base64"`
}

type cosignature struct {
	Name  string `json:"name"`
	Hash  string `json:"hash"`
	Time  uint64 `json:"time"`
	Valid bool   `json:"valid"`
	Error string `json:"error,omitempty"`
}

type report struct {
	Text           string        `json:"text,omitempty"`
	Sigs           []signature   `json:"sigs"`
	UnverifiedSigs []signature   `json:"unverified_sigs"`
	Cosignatures   []cosignature `json:"cosignatures"`
	Error          string        `json:"error,omitempty"`
	ErrorType      string        `json:"error_type,omitempty"`
}

func main() {
	var logs, witnesses keyList
	var skey string
	flag.Var(&logs, "log", "a log's verifier key (note.NewVerifier form); repeatable")
	flag.Var(&witnesses, "witness", "a witness's cosignature/v1 verifier key (type 0x04); repeatable")
	flag.StringVar(&skey, "sign", "", "sign stdin's text with this note signer key and print the note")
	flag.Parse()

	msg, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	if skey != "" {
		signer, err := note.NewSigner(skey)
		if err != nil {
			fail(err)
		}
		signed, err := note.Sign(&note.Note{Text: string(msg)}, signer)
		if err != nil {
			fail(err)
		}
		os.Stdout.Write(signed)
		return
	}

	var verifiers []note.Verifier
	for _, vkey := range logs {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			fail(fmt.Errorf("log vkey %q: %w", vkey, err))
		}
		verifiers = append(verifiers, v)
	}

	out := report{Sigs: []signature{}, UnverifiedSigs: []signature{}, Cosignatures: []cosignature{}}
	n, err := note.Open(msg, note.VerifierList(verifiers...))
	if err != nil {
		out.Error = err.Error()
		out.ErrorType = fmt.Sprintf("%T", err)
		emit(out)
		os.Exit(1)
	}
	out.Text = n.Text
	for _, s := range n.Sigs {
		out.Sigs = append(out.Sigs, signature{s.Name, fmt.Sprintf("%08x", s.Hash), s.Base64})
	}
	for _, s := range n.UnverifiedSigs {
		out.UnverifiedSigs = append(out.UnverifiedSigs, signature{s.Name, fmt.Sprintf("%08x", s.Hash), s.Base64})
	}
	for _, vkey := range witnesses {
		w, err := parseCosignatureKey(vkey)
		if err != nil {
			fail(fmt.Errorf("witness vkey %q: %w", vkey, err))
		}
		// The cosignature lines are signatures by keys note.Open does not know (type 0x04 is
		// not a note key): they are among the unverified ones, to be checked here.
		for _, s := range n.UnverifiedSigs {
			if s.Name == w.name && s.Hash == w.hash {
				out.Cosignatures = append(out.Cosignatures, w.check(n.Text, s))
			}
		}
	}
	emit(out)
}

// cosignatureKey is a witness's Ed25519 cosignature/v1 key, read from its vkey.
type cosignatureKey struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

// From c2sp.org/tlog-cosignature: the vkey is <name>+<hex key ID>+<base64(0x04 || 32-byte key)>,
// and the key ID is the first four bytes of SHA-256(name || 0x0A || 0x04 || public key).
func parseCosignatureKey(vkey string) (*cosignatureKey, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, errors.New("expected <name>+<hash>+<key>")
	}
	hash, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil || len(parts[1]) != 8 {
		return nil, errors.New("the key hash is not 8 hex digits")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 0x04 {
		return nil, errors.New("the key is not base64 of 0x04 and a 32-byte Ed25519 key")
	}
	h := sha256.New()
	h.Write([]byte(parts[0]))
	h.Write([]byte{0x0A, 0x04})
	h.Write(raw[1:])
	if id := binary.BigEndian.Uint32(h.Sum(nil)[:4]); id != uint32(hash) {
		return nil, fmt.Errorf("the key hash is %08x, not %08x", hash, id)
	}
	return &cosignatureKey{name: parts[0], hash: uint32(hash), key: ed25519.PublicKey(raw[1:])}, nil
}

// check verifies one cosignature line. From the spec: the signature line's bytes are the key ID,
// then the 8-byte big-endian timestamp (seconds since the epoch), then the Ed25519 signature of
// "cosignature/v1\ntime <timestamp>\n" followed by the checkpoint's note text.
func (w *cosignatureKey) check(text string, s note.Signature) cosignature {
	c := cosignature{Name: s.Name, Hash: fmt.Sprintf("%08x", s.Hash)}
	raw, err := base64.StdEncoding.DecodeString(s.Base64)
	if err != nil || len(raw) != 4+8+ed25519.SignatureSize {
		c.Error = fmt.Sprintf("expected %d bytes: key ID, timestamp, signature", 4+8+ed25519.SignatureSize)
		return c
	}
	if binary.BigEndian.Uint32(raw[:4]) != w.hash {
		c.Error = "another key ID"
		return c
	}
	c.Time = binary.BigEndian.Uint64(raw[4:12])
	var message bytes.Buffer
	fmt.Fprintf(&message, "cosignature/v1\ntime %d\n", c.Time)
	message.WriteString(text)
	c.Valid = ed25519.Verify(w.key, message.Bytes(), raw[12:])
	if !c.Valid {
		c.Error = "the Ed25519 signature does not verify"
	}
	return c
}

func emit(r report) {
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(r); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "notecheck: %v\n", err)
	os.Exit(2)
}
