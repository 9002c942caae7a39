package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/token"
)

// invites prints invite codes for a presale room, or with --lane priority
// lane codes of --uses places each, one per line, signed with the
// instance's keys (so every instance that shares them accepts them).
func invites(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("invites", getenv, stderr)
	dataDir := f.string("data-dir", "./data", "data directory")
	keysFlag := f.string("keys-dir", "", "signing keys directory (default <data-dir>/keys)")
	f.own("invites")
	room := f.string("room", "", "the room the codes admit to (required)")
	count := f.int("count", 1, fmt.Sprintf("how many codes, 1 to %d", httpapi.MaxInvites))
	validFor := f.duration("valid-for", httpapi.DefaultInviteTTL, "how long the codes are valid")
	lane := f.bool("lane", false, "sign priority lane codes (for rooms with priority_share) instead of invites")
	uses := f.int("uses", 1, fmt.Sprintf("places each lane code makes, 1 to %d (with --lane)", queue.MaxLaneUses))
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	switch {
	case !queue.ValidRoomID(*room):
		return fmt.Errorf("bad setting: --room/%s=%q: want a room id, [a-z0-9][a-z0-9-]{0,63}", f.envName("room"), *room)
	case *count < 1 || *count > httpapi.MaxInvites:
		return fmt.Errorf("bad setting: --count/%s=%d: want 1 to %d", f.envName("count"), *count, httpapi.MaxInvites)
	case *validFor < time.Minute || *validFor > httpapi.MaxInviteTTL:
		return fmt.Errorf("bad setting: --valid-for/%s=%v: want 1m to %v", f.envName("valid-for"), *validFor, httpapi.MaxInviteTTL)
	case *uses < 1 || *uses > queue.MaxLaneUses:
		return fmt.Errorf("bad setting: --uses/%s=%d: want 1 to %d", f.envName("uses"), *uses, queue.MaxLaneUses)
	case *uses != 1 && !*lane:
		return fmt.Errorf("bad setting: --uses/%s=%d: only with --lane", f.envName("uses"), *uses)
	}
	dir := keysDir(*keysFlag, *dataDir)
	if names, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(names) == 0 {
		return fmt.Errorf("no keys in %s (usher serve creates the first one)", dir)
	}
	ring, err := token.LoadDir(dir, time.Now)
	if err != nil {
		return err
	}
	exp := time.Now().Add(*validFor).Truncate(time.Second).UTC()
	for range *count {
		if *lane {
			fmt.Fprintln(stdout, ring.SignLaneCode(token.LaneCode{Room: *room, ID: token.NewInviteID(), Uses: int64(*uses), ExpiresAt: exp}))
			continue
		}
		fmt.Fprintln(stdout, ring.SignInvite(token.Invite{Room: *room, ID: token.NewInviteID(), ExpiresAt: exp}))
	}
	return nil
}
