package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"usher/internal/testenv"
	"usher/internal/token"
)

// TestInvitesCommand: usher invites prints codes that the instance's keys
// accept for the room, and refuses bad settings.
func TestInvitesCommand(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	ring, err := token.LoadDir(filepath.Join(dir, "keys"), time.Now) // the key serve would create
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) string { return map[string]string{"USHER_DATA_DIR": dir}[k] }
	var out bytes.Buffer
	if err := run(context.Background(), []string{"invites", "--room", "presale", "--count", "3"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	codes := strings.Fields(out.String())
	if len(codes) != 3 {
		t.Fatalf("%d codes, want 3:\n%s", len(codes), out.String())
	}
	for _, c := range codes {
		if _, err := ring.ParseInvite(c, "presale"); err != nil {
			t.Errorf("code %q: %v", c, err)
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"invites", "--room", "sale", "--count", "2", "--lane", "--uses", "10"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if codes = strings.Fields(out.String()); len(codes) != 2 {
		t.Fatalf("%d lane codes, want 2:\n%s", len(codes), out.String())
	}
	for _, c := range codes {
		if lc, err := ring.ParseLaneCode(c, "sale"); err != nil || lc.Uses != 10 {
			t.Errorf("lane code %q: %+v, %v; want 10 uses", c, lc, err)
		}
	}
	for _, args := range [][]string{{"--room", "Bad Room"}, {"--room", "r", "--count", "0"}, {"--room", "r", "--valid-for", "1s"},
		{"--room", "r", "--uses", "3"}, {"--room", "r", "--lane", "--uses", "0"}} {
		if err := run(context.Background(), append([]string{"invites"}, args...), env, io.Discard, io.Discard); err == nil {
			t.Errorf("invites %v: no error", args)
		}
	}
}
