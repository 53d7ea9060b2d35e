package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadChatTemplate: --chat-template takes a file that exists, else a
// built-in template's name; anything else is an error listing the names.
func TestLoadChatTemplate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "llama2") // a file wins over the name it spells
	if err := os.WriteFile(file, []byte("{{ messages[0]['content'] }}!"), 0o644); err != nil {
		t.Fatal(err)
	}
	tpl, err := loadChatTemplate(file)
	if err != nil || tpl.Name() != "" {
		t.Fatalf("file: %v, %v", tpl, err)
	}
	for _, name := range []string{"llama2", "llama3", "mistral-v7", "chatml", "phi3", "gemma", "deepseek3", "command-r", "zephyr", "vicuna"} {
		if tpl, err := loadChatTemplate(name); err != nil || tpl.Name() != name {
			t.Errorf("%s: %v, %v", name, tpl, err)
		}
	}
	_, err = loadChatTemplate("llama9")
	if err == nil || !strings.Contains(err.Error(), "not a built-in template") || !strings.Contains(err.Error(), "mistral-v3") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := loadChatTemplate(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a folder: %v", err)
	}
}
