package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// loadTLS returns the TLS configuration of --tls-cert and --tls-key, nil
// without them. A pair that cannot be read, or whose key is not the
// certificate's, stops start-up. The files are read again on the first
// handshake after either one's modification time changed, so that a
// renewed certificate is served without a restart (a pair that cannot be
// read then is logged, and the last good one served on).
func loadTLS(cfg *config, log *slog.Logger) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	r := &certReloader{certFile: cfg.TLSCert, keyFile: cfg.TLSKey, log: log}
	if err := r.reload(); err != nil {
		return nil, fmt.Errorf("%s, %s: %w", cfg.from("tls-cert"), cfg.from("tls-key"), err)
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.get,
	}, nil
}

// certReloader serves a certificate read from files, read again when they
// change.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu                sync.Mutex
	cert              *tls.Certificate
	certMod, keyMod   time.Time // of the files last read, good or not
	certSize, keySize int64
}

// get is tls.Config.GetCertificate: the certificate, read again first if
// its files changed. Two stats per handshake are little beside the
// handshake itself.
func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed() {
		if err := r.reloadLocked(); err != nil {
			r.log.Error("TLS certificate or key changed but cannot be used; serving the previous one", "error", err)
		} else {
			r.log.Info("TLS certificate read again", "cert", r.certFile)
		}
	}
	return r.cert, nil
}

// changed reports whether either file's modification time or size differs
// from when it was last read.
func (r *certReloader) changed() bool {
	c, errC := os.Stat(r.certFile)
	k, errK := os.Stat(r.keyFile)
	if errC != nil || errK != nil {
		return false // being replaced, most likely: the next handshake sees it
	}
	return !c.ModTime().Equal(r.certMod) || !k.ModTime().Equal(r.keyMod) || c.Size() != r.certSize || k.Size() != r.keySize
}

func (r *certReloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked()
}

// reloadLocked reads the pair; the files' times are recorded whether or
// not it can be used, so that a bad pair is logged once, not on every
// handshake.
func (r *certReloader) reloadLocked() error {
	if c, err := os.Stat(r.certFile); err == nil {
		r.certMod, r.certSize = c.ModTime(), c.Size()
	}
	if k, err := os.Stat(r.keyFile); err == nil {
		r.keyMod, r.keySize = k.ModTime(), k.Size()
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.cert = &cert
	return nil
}
