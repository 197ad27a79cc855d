#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/corpus.jsonl: the tokenizer parity corpus.

Pure Python and deterministic (no randomness at all: every string is written out or built by a
fixed rule), so re-running it gives a byte-identical file. One JSON string per line, UTF-8, with
U+0085, U+2028 and U+2029 escaped as \\uXXXX so that no reader can mistake them for line breaks.
No string holds U+0000: C JSON readers (cJSON) end strings at NUL.

Usage: python3 tests/oracle/tokenizer_corpus.py [OUT_PATH]
"""

import json
import os
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "fixtures", "tokenizer", "corpus.jsonl")

PROSE = [
    "Hello world",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "Describe this image.",
    "What shapes and colors are in this image? Answer briefly.",
    "The image contains a red square, a blue circle and a green triangle.",
    "You are a helpful assistant.",
    "A man, a plan, a canal: Panama.",
    "It was the best of times, it was the worst of times.",
    "Mr. Smith bought cheapsite.com for 1.5 million dollars, i.e. he paid a lot for it.",
    "\"Quoted text\" and 'single quotes' and `backticks`.",
    "Semicolons; colons: dashes - en\u2013dashes \u2013 em\u2014dashes \u2014 ellipsis\u2026",
    "Parentheses (like this) [and this] {and this} <and this>.",
    "ALL CAPS SENTENCE WITH SHOUTING!!!",
    "camelCaseIdentifier and snake_case_identifier and kebab-case-identifier",
    "e.g. i.e. etc. vs. Dr. St. No. 5",
    "Punctuation runs: ?!?!... ,,, ;;; ::: ---",
    "a",
    " ",
    "A",
    "!",
    "?",
    ".",
    "I",
    "x y z",
    "one two  three   four    five",
    "Supercalifragilisticexpialidocious",
    "Pneumonoultramicroscopicsilicovolcanoconiosis is a long word.",
    "antidisestablishmentarianism",
    "Donaudampfschifffahrtsgesellschaftskapit\u00e4n",
    "The caf\u00e9 served cr\u00e8me br\u00fbl\u00e9e and a pi\u00f1a colada.",
    "na\u00efve co\u00f6perate r\u00e9sum\u00e9 fa\u00e7ade",
    "\u00a9 2024 \u00ae \u2122 \u00a7 \u00b6 \u2020 \u2021 \u2022",
    "Temperature: 25\u00b0C (77\u00b0F), \u00b15%",
    "Currency: $100, \u20ac50, \u00a330, \u00a51000, \u20b9500, \u20bf0.01",
    "Math: \u2211 \u222b \u221a \u221e \u2248 \u2260 "
    "\u2264 \u2265 \u00d7 \u00f7 \u03c0 \u03b1 \u03b2 \u03b3",
    "Greek: \u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5",
    "Russian: \u041f\u0440\u0438\u0432\u0435\u0442, \u043a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "Hebrew: \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "Thai: \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
    "Korean: \uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
    "Japanese: \u3053\u3093\u306b\u3061\u306f\u4e16"
    "\u754c\u3002\u30ab\u30bf\u30ab\u30ca\u3082\u3002",
    "Vietnamese: Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u",
    "Turkish: \u0130stanbul \u0131\u015f\u0131k \u011f\u00fc\u00e7",
    "Polish: Za\u017c\u00f3\u0142\u0107 g\u0119\u015bl\u0105 ja\u017a\u0144",
    "Mixed: English \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628"
    "\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940 \U0001F600",
]

CODE = [
    "def main():\n    print(\"hello\")\n",
    "int main(void) {\n\treturn 0;\n}\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "if x == 1 and y != 2 or not z: pass",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\n",
    "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "<html><body><p class=\"x\">Text &amp; more</p></body></html>",
    "x => x * 2; const f = async () => { await g(); };",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f**=6;g//=7;h>>=8;i<<=9",
    "ptr->field = &var; *ptr++ = **pp; arr[idx] = ~mask ^ bits | flag & 0xFF;",
    "fn add<T: Add<Output = T>>(a: T, b: T) -> T { a + b }",
    "    indented with four spaces",
    "\tindented with a tab",
    "\t\t\tthree tabs",
    "  \t  mixed spaces and tabs\t  ",
    "// comment\n/* block\n   comment */\n",
    "$ ls -la | grep '\\.py$' && echo \"done\" > /dev/null 2>&1",
    "regex: ^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\\.[a-zA-Z0-9-.]+$",
    "path\\to\\windows\\file.txt and /usr/local/bin/tool",
    "0x1F 0b1010 0o777 1e-6 3.14159 -42 +7 1_000_000",
    "matrix[i][j] = matrix[i - 1][j - 1] + 1",
    "@decorator\nclass Foo(Bar, metaclass=Meta):\n    __slots__ = ('a',)\n",
]

WHITESPACE = [
    "",
    "  ",
    "   ",
    "    ",
    "        ",
    "\t",
    "\t\t",
    "\n",
    "\n\n",
    "\n\n\n",
    "\r\n",
    "\r\n\r\n",
    "\r",
    " \n",
    "\n ",
    " \n ",
    "a \n b",
    "a  \n  b",
    "trailing space ",
    "trailing spaces   ",
    "trailing tab\t",
    "trailing newline\n",
    "trailing crlf\r\n",
    " leading space",
    "   leading spaces",
    "\nleading newline",
    "word\n\nword",
    "word \n\n word",
    "line one\r\nline two\r\nline three",
    "tabs\tbetween\twords",
    "spaces  between   words    here",
    "end with spaces and newline   \n",
    "\u00a0non-breaking\u00a0space",
    "ideographic\u3000space",
    "em\u2003space and thin\u2009space",
    "line\u2028separator and paragraph\u2029separator",
    "next\u0085line",
    "zero\u200bwidth\u200bspace",
    "vertical\x0btab and form\x0cfeed",
    "!  \n",
    "x\n\n\ny",
    "   \n   \n   ",
]

CONTRACTIONS = []
for word in ("it", "IT", "It", "don", "DON", "they", "THEY", "we", "I", "you", "she"):
    for suffix in ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M",
                   "'LL", "'D", "'Re", "'vE"):
        CONTRACTIONS.append(word + suffix)
CONTRACTIONS = CONTRACTIONS[::3]  # keep the set varied but not huge
CONTRACTIONS += [
    "I'm sure you're right, he's late and they've gone, we'll see, she'd know, don't worry.",
    "I'M SURE YOU'RE RIGHT, HE'S LATE AND THEY'VE GONE, WE'LL SEE, SHE'D KNOW, DON'T WORRY.",
    "'s at start", "end with '", "quote 'inside' text", "rock 'n' roll", "'''triple'''",
    "it\u2019s a curly apostrophe", "o'clock O'Neil o'Reilly",
    "don't can't won't shouldn't wouldn't isn't aren't",
    "y'all'd've", "'ll'll'll", "x's y't z're",
]

NUMBERS = [
    "0", "1", "12", "123", "1234", "12345", "123456789", "1234567890123456789012345",
    "3.14", "-1", "+1", "1,000,000", "1.000.000,50", "2024-01-31", "12:34:56", "10%", "50/50",
    "1st 2nd 3rd 4th", "v1.2.3-beta.4", "IPv4 192.168.0.1", "phone +1 (555) 123-4567",
    "\u0661\u0662\u0663 Arabic-Indic digits", "\u0967\u0968\u0969 Devanagari digits",
    "\uff11\uff12\uff13 fullwidth digits", "\u2460\u2461\u2462 circled", "\u00bd \u00bc \u00be",
    "\u2153 \u215b vulgar fractions", "x\u00b2 + y\u00b3 = z\u2074", "H\u2082O",
    "Roman \u2160 \u2161 \u2162 \u216b", "99 bottles", "a1b2c3d4", "3D 4K 1080p 60fps",
]

CJK = [
    "\u4f60\u597d",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01",
    "\u8bf7\u63cf\u8ff0\u8fd9\u5f20\u56fe\u7247\u3002",
    "\u673a\u5668\u5b66\u4e60\u662f\u4eba\u5de5\u667a\u80fd\u7684\u4e00\u4e2a\u5206\u652f\u3002",
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211"
    "\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002",
    "\u4e2d\u6587English\u6df7\u5408mixed\u6587\u672c",
    "\u7e41\u9ad4\u4e2d\u6587\u6e2c\u8a66",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059\u3002",
    "\u6771\u4eac\u30bf\u30ef\u30fc\u306f333\u30e1\u30fc\u30c8\u30eb\u3067\u3059",
    "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4.",
    "\u3010\u6ce8\u610f\u3011\u300c\u5f15\u7528\u300d\u300e\u4e8c\u91cd\u300f",
    "\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341",
    "\U00020000\U0002A6D6 CJK Extension B",
    "\u9f98\u9f49\u9f7e rare characters",
    "\u3000\u3000\u5168\u89d2\u7a7a\u683c\u5f00\u5934",
    "\uff21\uff22\uff23 fullwidth latin \uff41\uff42\uff43",
]

ARABIC_HINDI = [
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0627\u0644\u0633\u0644\u0627\u0645 \u0639\u0644\u064a\u0643"
    "\u0645 \u0648\u0631\u062d\u0645\u0629 \u0627\u0644\u0644\u0647",
    "\u0647\u0630\u0647 \u0635\u0648\u0631\u0629 \u062c\u0645\u064a\u0644\u0629.",
    "\u0643\u064e\u062a\u064e\u0628\u064e with harakat",
    "\u0639\u0631\u0628\u064a English \u0639\u0631\u0628\u064a",
    "\u0641\u0627\u0631\u0633\u06cc: \u0633\u0644\u0627\u0645 \u062f\u0646\u06cc\u0627",
    "\u0627\u0631\u062f\u0648: \u06c1\u06cc\u0644\u0648",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u092f\u0939 \u090f\u0915 \u0938\u0941\u0902\u0926"
    "\u0930 \u091a\u093f\u0924\u094d\u0930 \u0939\u0948\u0964",
    "\u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f "
    "\u0936\u094d\u0930\u0940 \u091c\u094d\u091e\u093e\u0928",
    "\u0939\u093f\u0928\u094d\u0926\u0940 and English mixed",
    "\u09ac\u09be\u0982\u09b2\u09be: \u0986\u09ae"
    "\u09bf \u09ad\u09be\u09b2\u09cb \u0986\u099b\u09bf",
    "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd: \u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd",
]

EMOJI = [
    "\U0001F600",
    "\U0001F600\U0001F601\U0001F602",
    "I love it \u2764\ufe0f",
    "thumbs \U0001F44D\U0001F3FB \U0001F44D\U0001F3FC \U0001F44D"
    "\U0001F3FD \U0001F44D\U0001F3FE \U0001F44D\U0001F3FF",
    "family \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",
    "couple \U0001F469\u200d\u2764\ufe0f\u200d\U0001F468",
    "technologist \U0001F469\U0001F3FD\u200d\U0001F4BB",
    "rainbow flag \U0001F3F3\ufe0f\u200d\U0001F308",
    "flags \U0001F1FA\U0001F1F8 \U0001F1E8\U0001F1F3 \U0001F1EF\U0001F1F5",
    "keycap 1\ufe0f\u20e3 #\ufe0f\u20e3",
    "\U0001F9D1\u200d\U0001F91D\u200d\U0001F9D1 people holding hands",
    "emoji\U0001F680in\U0001F30Dthe\u2B50middle",
    "\u2600\ufe0f \u2601 \u2602\ufe0f text-presentation vs emoji",
    "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F tag sequence",
]

# Combining marks: each base string in NFC and in NFD (the tokenizer normalises to NFC, so the NFD
# line must give the same ids as the NFC one; decode then cannot give back the NFD bytes).
COMBINING_BASE = [
    "caf\u00e9", "\u00c5ngstr\u00f6m", "na\u00efve r\u00e9sum\u00e9", "Ti\u1ebfng Vi\u1ec7t",
    "\u1e9b\u0323 long s with dots", "\uac00\ud7a3 Hangul syllables", "\u00f1\u00d1 \u00fc\u00dc",
    "\u0390 iota with dialytika and tonos", "\u01d7 U with diaeresis and acute",
]
COMBINING = []
for s in COMBINING_BASE:
    COMBINING.append(unicodedata.normalize("NFC", s))
    COMBINING.append(unicodedata.normalize("NFD", s))
COMBINING += [
    "e\u0301\u0301 double acute (no precomposed form)",
    "a\u0308\u0304 stacked marks",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319 zalgo",
    "\u0301 combining mark at start",
    "x\u20d7 vector arrow",
    "\u0915\u093f \u0915\u0940 Devanagari vowel signs",
    "\u212b Angstrom sign (NFC maps it to \u00c5)",
    "\u2126 Ohm sign and \ufb01 ligature",
]

SPECIALS = [
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|vision_pad|>",
    "<|object_ref_start|>a dog<|object_ref_end|><|box_start|>(10,20),(30,40)<|box_end|>",
    "<|quad_start|>q<|quad_end|>",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<|fim_prefix|>def f(<|fim_suffix|>):\n    pass<|fim_middle|>",
    "<|repo_name|>vlmc<|file_sep|>README.md",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n",
    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|image_pad|><|image_pad|><|image_pad|><|image_pad|>",
    "text<|im_end|>text",
    " <|im_end|> ",
    "\n<|im_start|>\n",
    "<|im_start|><|im_end|>",
    "abc<|endoftext|>def",
    "<|vision_start|><|video_pad|><|vision_end|>",
]

NEAR_SPECIALS = [
    "<|im_start",
    "im_start|>",
    "<|im_start |>",
    "< |im_start|>",
    "<|IM_START|>",
    "<|im_star|>",
    "<|im_start|",
    "<|im_start|>>",
    "<<|im_start|>",
    "<|image_pad|",
    "|image_pad|>",
    "<|vision_start>",
    "<image_pad>",
    "<|unknown_token|>",
    "<|",
    "|>",
    "<||>",
    "<tool_call",
    "</tool_call >",
    "<|endoftext|x",
]

URLS = [
    "https://www.example.com/path/to/page?query=1&other=two#fragment",
    "http://localhost:8080/api/v1/items/42",
    "Visit https://github.com/huggingface/transformers for details.",
    "ftp://files.example.org/pub/file.tar.gz",
    "mailto:someone@example.com",
    "user.name+tag@sub.domain.co.uk",
    "www.\u4f8b\u3048.jp and https://\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444/",
    "https://example.com/%E4%BD%A0%E5%A5%BD?q=a%20b",
    "file:///home/user/My%20Documents/report.pdf",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
]

LONG = [
    "a" * 300,
    "ab" * 200,
    " " * 100,
    "\n" * 50,
    "x " * 150,
    "\u4e2d" * 120,
    "\U0001F600" * 40,
    "word " * 80,
    "-" * 64 + "=" * 64,
    "0123456789" * 20,
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco "
    "laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in "
    "voluptate velit esse cillum dolore eu fugiat nulla pariatur.",
    "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch",
    "thisisaverylongidentifierwithoutanyseparatorsthatkeepsgoingandgoingandgoingforeverandever",
]

MISC = [
    "\x01\x02\x03 control characters \x1f",
    "\x7f DEL",
    "\ufeff BOM at start",
    "\ufffd replacement character",
    "\U0010FFFD last plane private use",
    "\ue000 private use area",
    "\u200d\u200c joiners alone",
    "\u202e right-to-left override \u202c",
    "mixed\u00a0\u2009\u200a\u205f spaces",
    "tab\tnewline\ncarriage\rreturn",
    "Ok.",
    "ok",
    "OK",
    "okay...",
    "?!",
    "#hashtag @mention $cashtag",
    "snake_case__double__underscore___",
    "__init__.py",
    "...",
    "----",
    "====",
    "****bold****",
    "~~strike~~ _under_ ^super^",
    "| table | row |\n|---|---|\n| a | b |",
    "- item one\n- item two\n  - nested",
    "1. first\n2. second",
    "> quoted line\n>> nested quote",
    "```python\nprint(1)\n```",
]


def build_corpus():
    groups = [PROSE, CODE, WHITESPACE, CONTRACTIONS, NUMBERS, CJK, ARABIC_HINDI, EMOJI,
              COMBINING, SPECIALS, NEAR_SPECIALS, URLS, LONG, MISC]
    corpus = []
    for group in groups:
        corpus.extend(group)
    # Combinations: every whitespace shape around a few words, and numbers glued to letters, to
    # reach the regex's corner cases (\s+(?!\S), [^\r\n\p{L}\p{N}]?\p{L}+, \p{N} one digit each).
    for ws in (" ", "  ", "\t", "\n", "\r\n", " \n", "\n\n", "   "):
        corpus.append("alpha" + ws + "beta")
        corpus.append(ws + "gamma" + ws)
        corpus.append("x" + ws + ws + "1" + ws)
    for n in ("7", "42", "2024", "3.5"):
        corpus.append("abc" + n + "def")
        corpus.append(n + "px")
        corpus.append("$" + n)
    return corpus


def encode_line(s):
    line = json.dumps(s, ensure_ascii=False)
    for ch in ("\u0085", "\u2028", "\u2029"):
        line = line.replace(ch, "\\u%04x" % ord(ch))
    return line


def main(argv):
    out = argv[1] if len(argv) > 1 else DEFAULT_OUT
    corpus = build_corpus()
    assert len(corpus) >= 300, len(corpus)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        for s in corpus:
            f.write(encode_line(s) + "\n")
    print("wrote %d strings to %s" % (len(corpus), out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
