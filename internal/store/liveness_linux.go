package store

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// quietFor returns how long ago TCP connection c last received a byte,
// as the kernel counts it (whether or not the process read it yet); known
// is false when c is not a TCP connection.
func quietFor(c net.Conn) (quiet time.Duration, known bool) {
	sc, ok := netConnOf(c).(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var infoErr error
	if err := raw.Control(func(fd uintptr) {
		info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || infoErr != nil {
		return 0, false
	}
	return time.Duration(info.Last_data_recv) * time.Millisecond, true
}
