package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// A command that serves starts in this order, so that a failure leaves the
// data directory as it found it: it checks its settings (flags.check), then
// that the directories it will write can be written (checkWritable), binds
// its ports (listenTCP), opens what lives outside the process (Redis,
// PostgreSQL, an external NATS), and only then creates files in the data
// directory (openInOrder). Each error names the flag whose value failed
// first and ends with the cause:
//
//	--addr/USHER_ADDR="127.0.0.1:8080": address already in use

// checkWritable checks that dir can be created if missing and written,
// leaving nothing behind: it creates and removes a probe file in dir, or a
// probe directory in its nearest existing parent when dir does not exist
// yet. setting names the flag in the error.
func checkWritable(setting, dir string) error {
	at := dir
	for {
		fi, err := os.Stat(at)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s: %s is a file, not a directory", setting, at)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("%s: %w", setting, err)
		}
		parent := filepath.Dir(at)
		if parent == at {
			return fmt.Errorf("%s: %w", setting, err)
		}
		at = parent
	}
	var err error
	if at == dir {
		var f *os.File
		if f, err = os.CreateTemp(dir, ".usher-probe-*"); err == nil {
			f.Close()
			err = os.Remove(f.Name())
		}
	} else {
		var probe string
		if probe, err = os.MkdirTemp(at, ".usher-probe-*"); err == nil {
			err = os.Remove(probe)
		}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s: cannot write in %s: %w", setting, at, err)
	}
	return nil
}

// listenTCP binds addr, the value of the flag setting names.
func listenTCP(setting, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, netCause(err))
	}
	return ln, nil
}

// netCause drops what a net error repeats of its setting ("listen tcp
// 127.0.0.1:8080: bind: "), keeping the cause ("address already in use").
func netCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	var sc *os.SyscallError
	if errors.As(err, &sc) {
		err = sc.Err
	}
	return err
}

// step is one part a command opens at start; a local one writes into the
// data directory (a SQLite file, the embedded NATS server, the memory
// store's rooms, the keys).
type step struct {
	local bool
	open  func() error
}

// openInOrder opens the steps that are not local, then the local ones,
// each group in the order given, and stops at the first error: a
// connection refused never leaves files in the data directory.
func openInOrder(steps ...step) error {
	for _, local := range []bool{false, true} {
		for _, s := range steps {
			if s.local != local {
				continue
			}
			if err := s.open(); err != nil {
				return err
			}
		}
	}
	return nil
}
