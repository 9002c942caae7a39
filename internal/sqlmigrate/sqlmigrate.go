// Package sqlmigrate reads a SQL store's embedded migrations: files named
// <version>_<what>.sql in one directory, applied by the store in version
// order, each once, recording the versions in a table of its own.
package sqlmigrate

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// File is one migration.
type File struct {
	Version int
	Name    string // the file's path in the FS, for errors
	SQL     string
}

// Read returns the migrations in dir of fsys, in version order. A file
// whose name does not start with a number, or two files of one version,
// are an error.
func Read(fsys fs.FS, dir string) ([]File, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(names))
	for _, name := range names {
		version, err := strconv.Atoi(strings.SplitN(path.Base(name), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number: %w", name, err)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Version: version, Name: name, SQL: string(body)})
	}
	slices.SortFunc(files, func(a, b File) int { return a.Version - b.Version })
	for i := 1; i < len(files); i++ {
		if files[i].Version == files[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s: one version", files[i-1].Name, files[i].Name)
		}
	}
	return files, nil
}
