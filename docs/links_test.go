// Package docs holds the tests that keep the documentation's links whole:
// every relative link of README.md, docs/*.md, SECURITY.md and
// CHANGELOG.md must name a file that exists and, into a Markdown file, a
// heading it has.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinks checks every relative link of README.md, docs/*.md,
// SECURITY.md and CHANGELOG.md.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"README.md", "SECURITY.md", "CHANGELOG.md"} {
		pages = append(pages, filepath.Join("..", p))
	}
	files := make(map[string]string)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Clean(p)] = string(b)
	}
	links := 0
	for _, p := range pages {
		links += len(linksOf(files[filepath.Clean(p)]))
	}
	if links < 50 {
		t.Fatalf("found %d links in %d pages: the link pattern reads nothing", links, len(pages))
	}
	for _, problem := range brokenLinks(pages, files, readFile) {
		t.Error(problem)
	}
}

// TestDocsLinksFindsBroken: a link to a missing file or heading, and one
// into a code block's "heading", are reported; good ones are not.
func TestDocsLinksFindsBroken(t *testing.T) {
	files := map[string]string{
		"a.md": "# A page\n\n## Two words, `code` and [a link](b.md)\n\n" +
			"See [here](#two-words-code-and-a-link), [b](b.md#bs-heading), " +
			"[ok](b.md), [web](https://example.com/#x).\n\n" +
			"Broken: [gone](c.md), [no heading](b.md#nothing), [fenced](b.md#not-a-heading), [self](#a-pages),\n[over\ntwo lines](#two-lines).\n\n" +
			"`[in code](c.md)`\n",
		"b.md": "# B's heading\n\n```sh\n# not a heading\n```\n",
	}
	got := brokenLinks([]string{"a.md"}, files, func(string) (string, error) { return "", os.ErrNotExist })
	want := []string{
		"a.md: [gone](c.md): no such file",
		"a.md: [no heading](b.md#nothing): b.md has no heading #nothing",
		"a.md: [fenced](b.md#not-a-heading): b.md has no heading #not-a-heading",
		"a.md: [self](#a-pages): a.md has no heading #a-pages",
		"a.md: [over two lines](#two-lines): a.md has no heading #two-lines",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

// link is one [text](target) of a page.
type link struct{ text, target string }

var (
	linkPattern = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan    = regexp.MustCompile("`[^`]*`")
	fence       = regexp.MustCompile("^\\s*(```|~~~)")
	heading     = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// prose calls fn with each line of page outside fenced code blocks.
func prose(page string, fn func(line string)) {
	in := ""
	for line := range strings.SplitSeq(page, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case in == "":
				in = m[1]
			case in == m[1]:
				in = ""
			}
			continue
		}
		if in == "" {
			fn(line)
		}
	}
}

// linksOf returns the links of page outside code blocks and code spans;
// a link's text may run over lines.
func linksOf(page string) []link {
	var b strings.Builder
	prose(page, func(line string) {
		b.WriteString(line)
		b.WriteByte('\n')
	})
	var links []link
	text := codeSpan.ReplaceAllString(b.String(), "")
	for _, m := range linkPattern.FindAllStringSubmatch(text, -1) {
		links = append(links, link{strings.ReplaceAll(m[1], "\n", " "), m[2]})
	}
	return links
}

// anchors returns the anchors GitHub gives the headings of page.
func anchors(page string) map[string]bool {
	seen := make(map[string]int)
	out := make(map[string]bool)
	prose(page, func(line string) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		a := slug(m[2])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	})
	return out
}

// slug is GitHub's anchor of a heading's text: the text as rendered
// (links become their text), in lower case, with spaces made hyphens and
// everything but letters, digits, hyphens and underscores dropped.
func slug(text string) string {
	text = linkPattern.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// brokenLinks returns a line for each relative link of the pages that
// names a missing file, or a heading its Markdown file lacks. files holds
// pages by cleaned path; read reads any other file.
func brokenLinks(pages []string, files map[string]string, read func(string) (string, error)) []string {
	var problems []string
	for _, p := range pages {
		for _, l := range linksOf(files[filepath.Clean(p)]) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(l.target, "#")
			target := filepath.Clean(p)
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(p), path))
			}
			text, ok := files[target]
			if !ok {
				if _, err := os.Stat(target); err != nil {
					problems = append(problems, p+": ["+l.text+"]("+l.target+"): no such file")
					continue
				}
				if anchor != "" && strings.HasSuffix(target, ".md") {
					t, err := read(target)
					if err != nil {
						problems = append(problems, p+": ["+l.text+"]("+l.target+"): "+err.Error())
						continue
					}
					text = t
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if !anchors(text)[anchor] {
				name := path
				if name == "" {
					name = p
				}
				problems = append(problems, p+": ["+l.text+"]("+l.target+"): "+name+" has no heading #"+anchor)
			}
		}
	}
	return problems
}
