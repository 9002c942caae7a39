package token_test

import (
	"errors"
	"testing"
	"time"

	"usher/internal/token"
)

func TestLaneCode(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	k, _ := newRing(t, clk)
	want := token.LaneCode{Room: "sale", ID: token.NewInviteID(), Uses: 25, ExpiresAt: clk.Now().Add(time.Hour)}
	code := k.SignLaneCode(want)
	if got, err := k.ParseLaneCode(code, "sale"); err != nil || got != want {
		t.Fatalf("ParseLaneCode = %+v, %v; want %+v", got, err, want)
	}
	if _, err := k.ParseLaneCode(code, "other"); !errors.Is(err, token.ErrWrongRoom) {
		t.Errorf("other room: %v, want ErrWrongRoom", err)
	}
	invite := k.SignInvite(token.Invite{Room: "sale", ID: want.ID, ExpiresAt: want.ExpiresAt})
	for _, bad := range []string{code[:len(code)-2] + "xx", invite, "p1." + invite[3:]} {
		if _, err := k.ParseLaneCode(bad, "sale"); !errors.Is(err, token.ErrInvalid) {
			t.Errorf("ParseLaneCode(%.20q…) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := k.ParseInvite("n1."+code[3:], "sale"); !errors.Is(err, token.ErrInvalid) {
		t.Errorf("a lane code as an invite: %v, want ErrInvalid", err)
	}
	clk.Set(clk.Now().Add(time.Hour))
	if _, err := k.ParseLaneCode(code, "sale"); !errors.Is(err, token.ErrExpired) {
		t.Errorf("at expiry: %v, want ErrExpired", err)
	}
}
