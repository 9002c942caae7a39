package token_test

import (
	"errors"
	"testing"
	"time"

	"usher/internal/token"
)

func TestInvite(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	k, _ := newRing(t, clk)
	id := token.NewInviteID()
	code := k.SignInvite(token.Invite{Room: "presale", ID: id, ExpiresAt: clk.Now().Add(time.Hour)})
	inv, err := k.ParseInvite(code, "presale")
	if err != nil || inv.ID != id {
		t.Fatalf("ParseInvite = %+v, %v; want id %s", inv, err, id)
	}
	if _, err := k.ParseInvite(code, "other"); !errors.Is(err, token.ErrWrongRoom) {
		t.Errorf("other room: %v, want ErrWrongRoom", err)
	}
	for _, bad := range []string{code[:len(code)-2] + "xx", "n1." + code[3:10], k.SignTicket(token.Ticket{Room: "presale", Visitor: "v", IssuedAt: clk.Now()})} {
		if _, err := k.ParseInvite(bad, "presale"); !errors.Is(err, token.ErrInvalid) {
			t.Errorf("ParseInvite(%.20q…) = %v, want ErrInvalid", bad, err)
		}
	}
	clk.Set(clk.Now().Add(time.Hour))
	if _, err := k.ParseInvite(code, "presale"); !errors.Is(err, token.ErrExpired) {
		t.Errorf("at expiry: %v, want ErrExpired", err)
	}
}
