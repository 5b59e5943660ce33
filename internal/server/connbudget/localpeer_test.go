package connbudget

import (
	"net"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestLocalProcess: the client end of a loopback connection is found in
// /proc as this process.
func TestLocalProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc: Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := LocalProcess(s.LocalAddr(), s.RemoteAddr()), "proc:"+strconv.Itoa(os.Getpid()); got != want {
		t.Fatalf("LocalProcess: %q, want %q", got, want)
	}
	// Not loopback, or not TCP: unknown.
	if got := LocalProcess(s.LocalAddr(), &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}); got != "" {
		t.Fatalf("LocalProcess of a remote address: %q, want none", got)
	}
}
