package gateway

import "testing"

func TestRulesMatch(t *testing.T) {
	t.Parallel()
	rs := Rules{
		DefaultRoom: "sale",
		Gate:        []string{"/", "/static/private/"},
		Open:        []string{"/static/", "/healthz"},
		Routes:      []Route{{"/concert-a/", "room-a"}, {"/concert-a/vip/", "room-vip"}},
	}
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path      string
		wantRoom  string
		wantGated bool
	}{
		{"/", "sale", true},
		{"/checkout", "sale", true},
		{"/static/app.css", "sale", false},
		{"/static/private/x", "sale", true}, // longer gate pattern beats /static/
		{"/healthz", "sale", false},
		{"/healthz/db", "sale", false},
		{"/healthzx", "sale", true}, // a pattern without / matches whole segments
		{"/concert-a/", "room-a", true},
		{"/concert-a/seats", "room-a", true},
		{"/concert-a/vip/1", "room-vip", true}, // longest route wins
		{"/concert-ab", "sale", true},
	} {
		room, gated := rs.Match(tc.path)
		if room != tc.wantRoom || gated != tc.wantGated {
			t.Errorf("Match(%q) = %q, %v; want %q, %v", tc.path, room, gated, tc.wantRoom, tc.wantGated)
		}
	}
}

func TestRulesDefaultsAndTies(t *testing.T) {
	t.Parallel()
	rs := Rules{DefaultRoom: "sale"}
	if _, gated := rs.Match("/anything"); !gated {
		t.Error("no gate patterns: want everything gated")
	}
	rs = Rules{DefaultRoom: "sale", Gate: []string{"/shop/"}, Open: []string{"/shop/"}}
	if _, gated := rs.Match("/shop/x"); gated {
		t.Error("same pattern gated and open: want open")
	}
	rs = Rules{DefaultRoom: "sale", Gate: []string{"/shop/"}}
	if _, gated := rs.Match("/about"); gated {
		t.Error("a path no pattern matches: want open")
	}
}

func TestRulesValidate(t *testing.T) {
	t.Parallel()
	for _, rs := range []Rules{
		{DefaultRoom: "Bad Room"},
		{DefaultRoom: "sale", Gate: []string{"shop"}},
		{DefaultRoom: "sale", Open: []string{"/_usher/x"}},
		{DefaultRoom: "sale", Routes: []Route{{"/a/", "BAD"}}},
	} {
		if err := rs.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", rs)
		}
	}
	if _, err := ParseRoute("/a/"); err == nil {
		t.Error(`ParseRoute("/a/") = nil error, want one`)
	}
	r, err := ParseRoute("/concert-a/=room-a")
	if err != nil || r != (Route{"/concert-a/", "room-a"}) {
		t.Errorf("ParseRoute = %+v, %v", r, err)
	}
}

func TestRulesResolveCase(t *testing.T) {
	rs := Rules{
		DefaultRoom: "main",
		Gate:        []string{"/shop"},
		Open:        []string{"/static/"},
		Routes:      []Route{{Prefix: "/concert-a/", Room: "room-a"}},
	}
	type want struct {
		room  string
		gated bool
		err   bool
	}
	for _, tc := range []struct {
		path        string
		exact, fold want
	}{
		{"/shop/x", want{"main", true, false}, want{"main", true, false}},
		{"/SHOP/x", want{err: true}, want{"main", true, false}},
		{"/Shop", want{err: true}, want{"main", true, false}},
		{"/static/app.css", want{"main", false, false}, want{"main", false, false}},
		{"/STATIC/app.css", want{"main", false, false}, want{"main", false, false}},
		{"/Concert-A/x", want{err: true}, want{"room-a", false, false}},
		{"/About", want{"main", false, false}, want{"main", false, false}},
	} {
		for _, fold := range []bool{false, true} {
			r := rs
			r.FoldCase = fold
			w := tc.exact
			if fold {
				w = tc.fold
			}
			room, gated, err := r.Resolve(tc.path)
			if (err != nil) != w.err || room != w.room || gated != w.gated {
				t.Errorf("FoldCase=%v Resolve(%q) = %q, %v, %v; want %q, %v, err %v", fold, tc.path, room, gated, err, w.room, w.gated, w.err)
			}
		}
	}
}
