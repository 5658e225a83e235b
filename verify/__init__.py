"""The verify harness: runs each page's proof snippets on several processes and judges their claims."""
