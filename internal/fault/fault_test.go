package fault_test

import (
	"errors"
	"fmt"
	"testing"

	"usher/internal/fault"
)

func TestCodeAndMessage(t *testing.T) {
	sentinel := fault.New(fault.Invalid, "invalid input")
	other := fault.New(fault.NotFound, "not found")
	detail := sentinel.Detail("max_active: want 1 to %d", 10)
	for _, tc := range []struct {
		name          string
		err           error
		code, message string
		is            bool
	}{
		{"sentinel", sentinel, fault.Invalid, "invalid input", true},
		{"wrapped", fmt.Errorf("memqueue: room r: %w", sentinel), fault.Invalid, "invalid input", true},
		{"detail", fmt.Errorf("queue: %w", detail), fault.Invalid, "max_active: want 1 to 10", true},
		{"outermost wins", fmt.Errorf("x: %w: %w", other, sentinel), fault.NotFound, "not found", true},
		{"plain", errors.New("boom"), "", "", false},
		{"nil", nil, "", "", false},
	} {
		if got := fault.Code(tc.err); got != tc.code {
			t.Errorf("%s: Code = %q, want %q", tc.name, got, tc.code)
		}
		if got := fault.Message(tc.err); got != tc.message {
			t.Errorf("%s: Message = %q, want %q", tc.name, got, tc.message)
		}
		if got := errors.Is(tc.err, sentinel); got != tc.is {
			t.Errorf("%s: errors.Is(sentinel) = %v, want %v", tc.name, got, tc.is)
		}
	}
	if got, want := detail.Error(), "invalid input: max_active: want 1 to 10"; got != want {
		t.Errorf("detail.Error() = %q, want %q (logs keep the sentinel's words)", got, want)
	}
	if errors.Is(detail, other) {
		t.Error("a detail of one sentinel is another")
	}
}
