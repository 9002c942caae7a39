//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes the lock <dir>/<command>.lock for as long as the
// returned file stays open, so that a second `usher <command>` on the same
// data directory stops instead of sharing its files; the lock file keeps
// the holder's pid, for the error. The kernel releases the lock when the
// process ends, however it ends; the file stays.
func lockDataDir(dir, command string) (*os.File, error) {
	setting := sharedSetting("data-dir", dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	path := filepath.Join(dir, command+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: lock: %w", setting, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := "another usher " + command
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
			holder += " (pid " + strconv.Itoa(pid) + ")"
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: in use by %s, which holds %s; give each instance its own data directory", setting, holder, path)
		}
		return nil, fmt.Errorf("%s: lock %s: %w", setting, path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
