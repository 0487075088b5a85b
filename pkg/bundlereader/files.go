package bundlereader

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/flotilla/flotilla/pkg/content"
)

// ignoreFile lists, in a folder, names to leave out of the Bundle there and below.
const ignoreFile = ".fleetignore"

// readFolder reads the files of the folder root that go into a Bundle, keyed by
// their slash-separated path below root: every file except hidden ones (a name
// starting with a dot, and everything in such a folder) and those a .fleetignore
// names. Their paths and contents together may take at most limit bytes. A link is
// read only when what it points to is a file inside root; other special files are
// refused.
func readFolder(root string, limit int64) (map[string][]byte, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	budget := limit
	ignores := map[string][]string{}
	// links maps a link's path to its target's, both within root: checked once every
	// .fleetignore is known.
	links := map[string]string{}
	err = filepath.WalkDir(realRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(realRoot, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return addIgnores(ignores, p, rel)
		}
		if strings.HasPrefix(d.Name(), ".") || ignored(ignores, rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return addIgnores(ignores, p, rel)
		}
		data, target, err := readFile(realRoot, p, rel, d, budget)
		if err != nil {
			return err
		}
		if target != "" {
			links[rel] = target
		}
		if budget -= int64(len(rel) + len(data)); budget < 0 {
			return &content.TooLargeError{What: "the folder " + root, Limit: limit}
		}
		files[rel] = data
		return nil
	})
	if err != nil {
		return nil, err
	}
	for link, target := range links {
		if excluded(ignores, target) {
			return nil, fmt.Errorf("%s is a link to %s, which is hidden or named in a .fleetignore: such files stay out of a Bundle, linked or not", link, target)
		}
	}
	return files, nil
}

// excluded says whether the file at rel, or a folder above it, is hidden or ignored.
func excluded(ignores map[string][]string, rel string) bool {
	parts := strings.Split(rel, "/")
	for i := range parts {
		if strings.HasPrefix(parts[i], ".") || ignored(ignores, strings.Join(parts[:i+1], "/"), i < len(parts)-1) {
			return true
		}
	}
	return false
}

// readFile reads the file at p (rel within root), following a link only to a file
// inside root; for a link it also returns the target's path within root.
func readFile(root, p, rel string, d fs.DirEntry, budget int64) ([]byte, string, error) {
	inside := ""
	switch {
	case d.Type().IsRegular():
	case d.Type()&fs.ModeSymlink != 0:
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", rel, err)
		}
		inside, err = filepath.Rel(root, target)
		if err != nil || inside == ".." || strings.HasPrefix(inside, ".."+string(filepath.Separator)) || filepath.IsAbs(inside) {
			return nil, "", fmt.Errorf("%s is a link to %s, outside the folder: links may only point inside it", rel, target)
		}
		inside = filepath.ToSlash(inside)
		p = target
	default:
		return nil, "", fmt.Errorf("%s is not a file (%s); only files and links to files go into a Bundle", rel, d.Type())
	}
	data, err := readRegular(p, max(budget, 0))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", rel, err)
	}
	return data, inside, nil
}

// readRegular reads the file at p if it is a regular file (checked on the opened
// file, so that it cannot be swapped for a pipe or a device in between), at most limit
// bytes of it.
func readRegular(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a file (%s)", fi.Mode().Type())
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, &content.TooLargeError{What: p, Limit: limit}
	}
	return buf.Bytes(), nil
}

// readBounded reads the file at p, not following a link, if it is a regular file of
// at most limit bytes.
func readBounded(p string, limit int64) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a file (%s)", p, fi.Mode().Type())
	}
	return readRegular(p, limit)
}

// addIgnores reads the .fleetignore of the folder at p (rel within the root).
func addIgnores(ignores map[string][]string, p, rel string) error {
	data, err := readBounded(filepath.Join(p, ignoreFile), maxFleetYAML)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path.Join(rel, ignoreFile), err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := trimIgnoreLine(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := path.Match(strings.TrimSuffix(line, "/*"), ""); err != nil {
			return fmt.Errorf("%s: pattern %q: %w", path.Join(rel, ignoreFile), line, err)
		}
		ignores[rel] = append(ignores[rel], line)
	}
	return sc.Err()
}

// trimIgnoreLine drops trailing blanks unless the last one is escaped.
func trimIgnoreLine(s string) string {
	trimmed := strings.TrimRight(s, " \t")
	if len(trimmed) < len(s) && strings.HasSuffix(trimmed, `\`) {
		return s[:len(trimmed)+1]
	}
	return trimmed
}

// ignored says whether the entry at rel is named by the .fleetignore of a folder
// above it: a pattern matches the entry's base name; "name/*" matches a folder.
func ignored(ignores map[string][]string, rel string, isDir bool) bool {
	base := path.Base(rel)
	for dir := path.Dir(rel); ; dir = path.Dir(dir) {
		for _, pattern := range ignores[dir] {
			if folder, ok := strings.CutSuffix(pattern, "/*"); ok && folder != "" {
				if isDir && folder == base {
					return true
				}
				continue
			}
			if ok, _ := path.Match(pattern, base); ok {
				return true
			}
		}
		if dir == "." {
			return false
		}
	}
}
