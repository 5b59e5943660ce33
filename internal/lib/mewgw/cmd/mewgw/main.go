// Command mewgw runs the stand-in MEW gateway of package mewgw on its
// own, for trying `ledger bridge mew` without a MEW installation: it
// listens on -listen, waits until -wait has joined -space, then replays
// the frames of a real capture (-replay, one frame per line, its first
// line — the capturing observer's own welcome — left out) to every
// participant of the space, -every apart, and keeps serving until
// interrupted. It is a test tool, not a MEW gateway.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mewledger/ledger/internal/lib/mewgw"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	space := flag.String("space", "", "MEW space id to replay into")
	replay := flag.String("replay", "", "capture file to replay (JSON lines)")
	wait := flag.String("wait", "", "participant to wait for before replaying")
	every := flag.Duration("every", 100*time.Millisecond, "pause between frames")
	flag.Parse()
	if err := run(*listen, *space, *replay, *wait, *every); err != nil {
		fmt.Fprintln(os.Stderr, "mewgw:", err)
		os.Exit(1)
	}
}

func run(listen, space, replay, wait string, every time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	gw, err := mewgw.StartOn(listen, nil)
	if err != nil {
		return err
	}
	defer gw.Close()
	fmt.Fprintf(os.Stderr, "mewgw: stand-in MEW gateway on %s\n", gw.URL())
	if replay != "" {
		data, err := os.ReadFile(replay)
		if err != nil {
			return err
		}
		if wait != "" {
			fmt.Fprintf(os.Stderr, "mewgw: waiting for %s to join %s\n", wait, space)
			if err := gw.WaitJoins(ctx, space, wait, 1); err != nil {
				return err
			}
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		n := 0
		for sc.Scan() {
			if n++; n == 1 {
				continue
			}
			gw.Broadcast(space, append([]byte(nil), sc.Bytes()...))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(every):
			}
		}
		fmt.Fprintf(os.Stderr, "mewgw: replayed %d frames of %s\n", n-1, replay)
	}
	<-ctx.Done()
	return nil
}
