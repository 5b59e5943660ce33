package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/internal/lib/mewgw"
)

// The bridge figure's stand-in gateway runs in a process of its own (the
// benchmark's binary again, as the memory children do), so that the
// frames cross a real loopback WebSocket between two processes and the
// gateway's writing does not share the ledger's scheduler.

// GatewayFlag is the flag that turns `ledger bench` into the bridge
// figure's gateway child.
const GatewayFlag = "internal-gateway"

// Names the gateway child and the bridge agree on.
const (
	bridgeMEWSpace    = "bench"
	bridgeParticipant = "ledger-recorder"
)

// IsChild reports whether args (after `bench`) start a child of the
// benchmark (a memory child or the bridge figure's gateway).
func IsChild(args []string) bool {
	return len(args) > 0 && (strings.HasPrefix(args[0], "--"+ChildFlag) || strings.HasPrefix(args[0], "--"+GatewayFlag))
}

// gatewayHello is the gateway child's first line: where it listens and
// how many frames it will send.
type gatewayHello struct {
	URL    string `json:"url"`
	Frames int    `json:"frames"`
}

// bridgeFrames are the frames the bridge figure replays: the proposals
// of n workload events (the rest of the mix would be skipped or
// orphaned), and those events.
func bridgeFrames(n, padTo int) (frames [][]byte, props []event, err error) {
	evs, err := generate(0, n, padTo)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range evs {
		if bytes.Contains(e.raw, proposalKind) {
			props = append(props, e)
			frames = append(frames, e.raw)
		}
	}
	return frames, props, nil
}

// RunGatewayChild is the gateway child: it starts the stand-in MEW
// gateway on a loopback port, prints a gatewayHello line, waits for the
// bridge to join and for a line on in (the parent saw the bridge
// joined), prints "sending", broadcasts the frames as fast as the
// WebSocket takes them, prints "sent", and serves until in is closed.
func RunGatewayChild(ctx context.Context, in io.Reader, w io.Writer, n, padTo int) error {
	return runGatewayChild(ctx, in, w, n, padTo, "")
}

// runGatewayChild is RunGatewayChild; with history set, the gateway also
// writes its envelope-history.jsonl there (the recorders figure).
func runGatewayChild(ctx context.Context, in io.Reader, w io.Writer, n, padTo int, history string) error {
	frames, _, err := bridgeFrames(n, padTo)
	if err != nil {
		return err
	}
	g, err := mewgw.StartOn("127.0.0.1:0", nil)
	if err != nil {
		return fmt.Errorf("bench: gateway child: %w", err)
	}
	defer g.Close()
	if history != "" {
		if err := g.RecordHistory(history); err != nil {
			return fmt.Errorf("bench: gateway child: %w", err)
		}
	}
	hello, _ := json.Marshal(gatewayHello{URL: g.URL(), Frames: len(frames)})
	if _, err := fmt.Fprintf(w, "%s\n", hello); err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := g.WaitJoins(jctx, bridgeMEWSpace, bridgeParticipant, 1); err != nil {
		return fmt.Errorf("bench: gateway child: the bridge did not join: %w", err)
	}
	rd := bufio.NewReader(in)
	if _, err := rd.ReadString('\n'); err != nil {
		return fmt.Errorf("bench: gateway child: waiting for the go: %w", err)
	}
	if _, err := fmt.Fprintln(w, "sending"); err != nil {
		return err
	}
	for _, f := range frames {
		g.Broadcast(bridgeMEWSpace, f)
	}
	if _, err := fmt.Fprintln(w, "sent"); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, rd) // until the parent closes in
	return nil
}

// gatewayChild is a running gateway child, seen from the parent.
type gatewayChild struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	hello  gatewayHello
	stderr bytes.Buffer // read once the child has exited
}

// startGatewayChild starts a gateway child for n workload events and
// reads its hello.
func startGatewayChild(ctx context.Context, o *Options, n int, more ...string) (*gatewayChild, error) {
	args := append(append([]string{}, o.ChildCommand[1:]...), "--"+GatewayFlag+"="+strconv.Itoa(n), "--internal-pad="+strconv.Itoa(o.PadTo))
	args = append(args, more...)
	cmd := exec.CommandContext(ctx, o.ChildCommand[0], args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+o.TempDir)
	c := &gatewayChild{cmd: cmd}
	cmd.Stderr = &c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: gateway child: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: gateway child: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: gateway child: %w", err)
	}
	c.in, c.out = in, bufio.NewReader(out)
	line, err := c.out.ReadString('\n')
	if err == nil {
		err = json.Unmarshal([]byte(line), &c.hello)
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("bench: gateway child: no hello (%q): %w: %s", line, err, bytes.TrimSpace(c.stderr.Bytes()))
	}
	return c, nil
}

// send tells the child to broadcast and returns when it starts.
func (c *gatewayChild) send() error {
	if _, err := io.WriteString(c.in, "go\n"); err != nil {
		return fmt.Errorf("bench: gateway child: %w", err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "sending" {
		return fmt.Errorf("bench: gateway child: %q instead of sending: %w", line, errors.Join(err, errors.New("unexpected line")))
	}
	return nil
}

// close ends the child (its stdin closed) and waits for it.
func (c *gatewayChild) close() {
	_ = c.in.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
