package console

import "testing"

// TestAbandonment: a share is shown only while a rate shows, so 100 %
// never sits next to "0 left/s".
func TestAbandonment(t *testing.T) {
	for _, tc := range []struct {
		leave, admitted float64
		want            float64 // -1: none
	}{
		{0, 0, -1},
		{0.001, 0, -1},    // a leave rate that shows as 0
		{0.04, 0.001, -1}, // neither shows
		{1, 0, 1},
		{1, 3, 0.25},
		{0, 2, 0},
	} {
		got := abandonment(tc.leave, tc.admitted)
		switch {
		case tc.want < 0 && got != nil:
			t.Errorf("abandonment(%v, %v) = %v, want none", tc.leave, tc.admitted, *got)
		case tc.want >= 0 && (got == nil || *got != tc.want):
			t.Errorf("abandonment(%v, %v) = %v, want %v", tc.leave, tc.admitted, got, tc.want)
		}
	}
}
