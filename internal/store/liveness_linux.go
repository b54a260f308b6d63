package store

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpStateOf returns what the kernel knows of TCP connection c: how long
// ago it last received a byte (whether or not the process read it yet),
// and whether some of what was sent is not acknowledged yet; known is
// false when c is not a TCP connection.
func tcpStateOf(c net.Conn) (s tcpState, known bool) {
	sc, ok := netConnOf(c).(syscall.Conn)
	if !ok {
		return s, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return s, false
	}
	var info *unix.TCPInfo
	var infoErr error
	if err := raw.Control(func(fd uintptr) {
		info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || infoErr != nil {
		return s, false
	}
	return tcpState{quiet: time.Duration(info.Last_data_recv) * time.Millisecond, unacked: info.Unacked > 0}, true
}
