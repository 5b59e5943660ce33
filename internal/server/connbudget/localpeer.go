package connbudget

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Local callers' shares (issue 36, open mode). Without tokens every local
// program reaches the server from the loopback address, so one share per
// address would let one local program's idle watchers, MCP waits and MCP
// sessions lock every other local program out. A caller without a token
// on a loopback connection is named by the process that owns the
// connection's client end ("proc:<pid>"), found in /proc (Linux: the
// socket in /proc/net/tcp{,6}, then its inode among the open files of
// /proc/<pid>/fd): every connection of one program counts against one
// share, so a program cannot take more than its share by opening more
// connections, and each other program has a share of its own. When the
// owner cannot be found (not Linux, /proc hidden, a process of another
// user) the caller is named by its connection ("conn:<addr>"), as before.

// LocalProcess names the process that owns the client end of the loopback
// TCP connection from remote to local: "proc:<pid>", or "" when it cannot
// be found.
func LocalProcess(local, remote net.Addr) string {
	l, ok1 := local.(*net.TCPAddr)
	r, ok2 := remote.(*net.TCPAddr)
	if !ok1 || !ok2 || !r.IP.IsLoopback() {
		return ""
	}
	inode := socketInode(r, l)
	if inode == "" {
		return ""
	}
	if pid := procs.owner(inode); pid != "" {
		return "proc:" + pid
	}
	return ""
}

// socketInode finds the inode of the TCP socket whose local end is self
// and remote end is peer, in /proc/net/tcp and /proc/net/tcp6.
func socketInode(self, peer *net.TCPAddr) string {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if ino := scanTCPTable(f, self, peer); ino != "" {
			return ino
		}
	}
	return ""
}

func scanTCPTable(path string, self, peer *net.TCPAddr) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		if !hexAddrIs(fs[1], self) || !hexAddrIs(fs[2], peer) {
			continue
		}
		if fs[9] != "0" {
			return fs[9]
		}
	}
	return ""
}

// hexAddrIs reports whether s ("0100007F:1F90": the address as 32-bit
// words in the kernel's byte order, the port in hex) is a.
func hexAddrIs(s string, a *net.TCPAddr) bool {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil || int(port) != a.Port {
		return false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return false
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	return ip.Equal(a.IP)
}

// procTable maps socket inodes to the pids that hold them, from the last
// scan of /proc/*/fd. A lookup that misses rescans (one scan at a time);
// the map is rebuilt by each scan, so it holds the sockets open then.
type procTable struct {
	mu     sync.Mutex
	byNode map[string]string
}

var procs procTable

func (t *procTable) owner(inode string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pid, ok := t.byNode[inode]; ok {
		return pid
	}
	t.byNode = scanProcFDs()
	return t.byNode[inode]
}

func scanProcFDs() map[string]string {
	out := map[string]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid := e.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		dir := "/proc/" + pid + "/fd/"
		fds, err := os.ReadDir(dir) // another user's process: not readable, skipped
		if err != nil {
			continue
		}
		for _, fd := range fds {
			l, err := os.Readlink(dir + fd.Name())
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			ino := strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")
			if _, dup := out[ino]; !dup {
				out[ino] = pid
			}
		}
	}
	return out
}

// localKey names the anonymous caller of a connection in open mode: its
// process when loopback and found, else the connection. Computed once
// per connection.
func (c *Conn) localKey() string {
	c.keyOnce.Do(func() {
		if p := LocalProcess(c.LocalAddr(), c.RemoteAddr()); p != "" {
			c.key = p
		} else {
			c.key = "conn:" + c.RemoteAddr().String()
		}
	})
	return c.key
}

// openModeClient names a caller without a token in open mode (see the
// comment at the top of this file).
func openModeClient(r *http.Request) string {
	if c, ok := r.Context().Value(ctxKey{}).(*Conn); ok {
		return c.localKey()
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			if p := LocalProcess(la, net.TCPAddrFromAddrPort(ap)); p != "" {
				return p
			}
		}
	}
	return "conn:" + r.RemoteAddr
}
