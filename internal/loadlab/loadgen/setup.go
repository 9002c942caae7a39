package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// PutRoom configures a room before a run: PUT {admin}/api/v1/rooms/{room}
// on usher's admin listener, with settings (the JSON that usher plan
// prints) and the admin key.
func PutRoom(ctx context.Context, client *http.Client, admin, room, adminKey string, settings []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, admin+"/api/v1/rooms/"+room, bytes.NewReader(settings))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminKey)
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("configure room %s: %w", room, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("configure room %s: %s: %s", room, res.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
