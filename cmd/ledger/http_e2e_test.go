package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openFDs counts the descriptors process pid has open.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Issue 15, item 6, on a real `ledger serve`: a request whose body never
// comes is cut off, and many connections that never finish their headers
// neither take more than --http-max-conns descriptors nor keep a normal
// client from being served.
func TestServeSlowClients(t *testing.T) {
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	const maxConns = 8
	s := startServer(t, bin, filepath.Join(dir, "data"),
		"--http-header-timeout", "1s", "--http-body-idle-timeout", "500ms", "--http-max-conns", fmt.Sprint(maxConns))

	// A body that never comes: the server answers or hangs up within the
	// idle timeout, instead of holding the request for ever.
	c, err := net.Dial("tcp", s.addr.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(hostileHTTP(t, "http-body-never-comes.http")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // the test's bound, 120 times the server's
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	switch {
	case err == nil:
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("slow body answered %d", resp.StatusCode)
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatal("a request whose body never comes is still held after a minute")
	}

	// Many connections that never finish their headers.
	pid := s.cmd.Process.Pid
	base := openFDs(t, pid)
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	for range 5 * maxConns {
		c, err := net.Dial("tcp", s.addr.HTTP)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /v1/status HTTP/1.1\r\n")
		slow = append(slow, c)
	}
	normal := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Minute}
	r, err := normal.Get(s.apiURL + "/healthz")
	if err != nil {
		t.Fatalf("a normal client is not served behind %d slow connections: %v", len(slow), err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || !strings.Contains(string(b), "ok") {
		t.Fatalf("/healthz %d %s", r.StatusCode, b)
	}
	if got := openFDs(t, pid); got > base+maxConns+4 {
		t.Fatalf("%d descriptors open with %d slow connections, %d before: the cap of %d connections does not hold", got, len(slow), base, maxConns)
	}
}

// hostileHTTP reads a raw HTTP input of the hostile corpus
// (testdata/hostile/*.http: requests that broke the server once).
func hostileHTTP(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hostile", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
