package main

// The runbook, run: every command in docs/runbook.md's sh blocks is
// executed or checked, so that the runbook cannot name a flag, a route or a
// file that does not exist. `usher plan`, `usher version` and `usher …
// --print` run through run; the server commands (serve, auth, proxy, …)
// parse their flags and stop at -h; curl lines go to a real usher serve
// with $ADMIN its address and $KEY its admin key, in the runbook's order,
// and must answer 2xx; the kill-switch lines (touch, rm) must name the
// file in the edge directory that a printed configuration looks for;
// nginx must be given the file and directory the runbook printed;
// scripts must exist. A command of any other program fails the test.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"usher/internal/testenv"
)

func TestRunbookCommands(t *testing.T) {
	t.Parallel()
	cmds := shCommands(readDoc(t, "docs/runbook.md"))
	key := strings.Repeat("k", 32)
	base := startServe(t, nil, "--addr", "127.0.0.1:0", "--data-dir", testenv.DataDir(t), "--admin-key", key)
	vars := map[string]string{"ADMIN": adminOf(t, base), "KEY": key}

	printed := map[string]string{}  // file the runbook writes → the configuration
	edgeDirs := map[string]string{} // that file → its --edge-dir
	seen := map[string]int{}
	for _, c := range cmds {
		words, err := runbookWords(c.text, vars)
		if err != nil {
			t.Errorf("runbook.md:%d: %v", c.line, err)
			continue
		}
		cmd, redirect, err := pipeline(words)
		if err != nil {
			t.Errorf("runbook.md:%d: %v", c.line, err)
			continue
		}
		seen[cmd[0]]++
		switch name := cmd[0]; {
		case name == "usher":
			out, err := runbookUsher(cmd[1:])
			if err != nil {
				t.Errorf("runbook.md:%d: %s: %v", c.line, c.text, err)
				continue
			}
			if redirect != "" {
				printed[redirect] = out
				edgeDirs[redirect] = flagValue(cmd, "--edge-dir")
			}
		case name == "curl":
			status, body, err := runbookCurl(cmd[1:])
			if err != nil || status/100 != 2 {
				t.Errorf("runbook.md:%d: %s: %d %v %s", c.line, c.text, status, err, body)
			}
		case name == "touch" || name == "rm":
			if len(cmd) != 2 || filepath.Base(cmd[1]) != "usher-off" {
				t.Errorf("runbook.md:%d: %s: want one path ending in usher-off, the kill switch", c.line, c.text)
				continue
			}
			found := false
			for file, conf := range printed {
				found = found || (filepath.Dir(cmd[1]) == edgeDirs[file] && strings.Contains(conf, cmd[1]))
			}
			if !found {
				t.Errorf("runbook.md:%d: %s: no configuration the runbook printed looks for %s", c.line, c.text, cmd[1])
			}
		case name == "nginx":
			conf, dir := flagValue(cmd, "-c"), flagValue(cmd, "-p")
			if _, ok := printed[conf]; !ok || edgeDirs[conf] != dir {
				t.Errorf("runbook.md:%d: %s: want -c a configuration the runbook printed and -p its --edge-dir (%v)", c.line, c.text, edgeDirs)
			}
		case strings.HasPrefix(name, "scripts/"):
			if fi, err := os.Stat(filepath.Join("..", "..", name)); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("runbook.md:%d: %s: want an executable script: %v", c.line, name, err)
			}
		default:
			t.Errorf("runbook.md:%d: %s: a program this test does not know; run it here or leave it out", c.line, c.text)
		}
	}
	// The runbook's sections each have their commands.
	for _, want := range []string{"usher", "curl", "touch", "rm", "nginx"} {
		if seen[want] == 0 {
			t.Errorf("runbook.md runs no %s command, want the plan, the admin calls and the kill switch", want)
		}
	}
}

// runbookUsher runs `usher args…`: in full for the commands that only
// print, else up to the flags (-h after them: a flag that does not exist or
// a value of the wrong kind fails, nothing starts).
func runbookUsher(args []string) (string, error) {
	if len(args) == 0 {
		return "", fmt.Errorf("usher without a command")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noEnv := func(string) string { return "" }
	var out bytes.Buffer
	switch {
	case args[0] == "plan", args[0] == "version", flagValue(args, "--print") != "":
		err := run(ctx, args, noEnv, &out, io.Discard)
		return out.String(), err
	}
	cancel() // a server that started anyway would stop at once
	var errOut bytes.Buffer
	err := run(ctx, append(append([]string{}, args...), "-h"), noEnv, &out, &errOut)
	if err == nil && !strings.Contains(errOut.String(), "Usage of "+args[0]) {
		err = fmt.Errorf("no usage printed: a word stopped the flags before -h")
	}
	return out.String(), err
}

// runbookCurl sends the request a curl command line describes (-X, -H,
// -d, -s, -f and the URL) and returns the status and body.
func runbookCurl(args []string) (int, string, error) {
	method, url, body := "", "", ""
	header := http.Header{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-X" || a == "-H" || a == "-d":
			if i+1 == len(args) {
				return 0, "", fmt.Errorf("%s without a value", a)
			}
			i++
			switch a {
			case "-X":
				method = args[i]
			case "-H":
				k, v, ok := strings.Cut(args[i], ":")
				if !ok {
					return 0, "", fmt.Errorf("header %q", args[i])
				}
				header.Set(k, strings.TrimSpace(v))
			case "-d":
				body = args[i]
			}
		case a == "-s" || a == "-f" || a == "-sf":
		case strings.HasPrefix(a, "-"):
			return 0, "", fmt.Errorf("curl flag %s: this test knows -X -H -d -s -f", a)
		case url != "":
			return 0, "", fmt.Errorf("two URLs: %s %s", url, a)
		default:
			url = a
		}
	}
	if method == "" {
		method = http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header = header
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

type shCommand struct {
	text string
	line int
}

// shCommands returns the command lines of a markdown file's ```sh blocks,
// with backslash continuations joined.
func shCommands(md string) []shCommand {
	var cmds []shCommand
	in := false
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in = true
			continue
		case in && strings.TrimSpace(line) == "```":
			in = false
			continue
		case !in:
			continue
		}
		if cur.Len() == 0 {
			if strings.TrimSpace(line) == "" {
				continue
			}
			start = i + 1
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s)
			continue
		}
		cur.WriteString(line)
		cmds = append(cmds, shCommand{strings.TrimSpace(cur.String()), start})
		cur.Reset()
	}
	return cmds
}

// runbookWords splits a command line as sh does for the runbook's simple
// lines: single and double quotes, $NAME and ${NAME} expanded from vars
// (outside single quotes; an unknown name is an error), # comments, and
// unquoted | and > as words of their own.
func runbookWords(line string, vars map[string]string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quote := false, rune(0)
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '$':
			j := i + 1
			braced := j < len(rs) && rs[j] == '{'
			if braced {
				j++
			}
			k := j
			for k < len(rs) && (rs[k] == '_' || rs[k] >= 'A' && rs[k] <= 'Z' || rs[k] >= 'a' && rs[k] <= 'z' || rs[k] >= '0' && rs[k] <= '9') {
				k++
			}
			name := string(rs[j:k])
			v, ok := vars[name]
			if !ok {
				return nil, fmt.Errorf("$%s: not a variable the runbook defines", name)
			}
			if braced {
				if k == len(rs) || rs[k] != '}' {
					return nil, fmt.Errorf("unclosed ${")
				}
				k++
			}
			w.WriteString(v)
			inWord = true
			i = k - 1
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			flush()
		case r == '#' && !inWord:
			flush()
			return words, nil
		case r == '|' || r == '>':
			flush()
			words = append(words, string(r))
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c", quote)
	}
	flush()
	return words, nil
}

// pipeline returns a line's first command and the file its output is
// redirected to, if any; the commands it pipes into may only be jq.
func pipeline(words []string) (cmd []string, redirect string, err error) {
	for i := 0; i < len(words); i++ {
		switch words[i] {
		case ">":
			if i+1 != len(words)-1 {
				return nil, "", fmt.Errorf("want one file after >")
			}
			return cmd, words[i+1], nil
		case "|":
			if i+1 == len(words) || words[i+1] != "jq" {
				return nil, "", fmt.Errorf("a pipe into something other than jq")
			}
			return cmd, "", nil
		}
		cmd = append(cmd, words[i])
	}
	if len(cmd) == 0 {
		return nil, "", fmt.Errorf("an empty command")
	}
	return cmd, "", nil
}

// flagValue returns the value of --name (or -name) in args: the next word,
// or what follows "=".
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}
