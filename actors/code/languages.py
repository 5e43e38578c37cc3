"""Supported languages: file extensions, tree-sitter grammars and symbol queries.

Each language is a `Spec`: the grammar name in ``tree-sitter-language-pack``
0.13.0 (which bundles every grammar, so nothing is downloaded), one query whose
patterns capture a definition node under its *kind* (``@function``,
``@class``, ``@import`` ...) and the node holding its name as ``@name``, and a
few per-language rules (which parents turn a function into a method, how a
name is completed). Captures starting with ``_`` are predicate helpers;
``@embed.<lang>`` marks a region parsed again with another grammar (the
``<script>`` of HTML, the ``~H`` sigils of Elixir), and ``@region.<lang>`` an
element whose content (between its start and end tags) is parsed as ``<lang>``.

Queries do the matching in C; the Python work per symbol is a handful of
attribute reads (see ``extract``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the grammars are loaded by `extract`, in the parser workers
    from tree_sitter import Node
    from tree_sitter_language_pack import SupportedLanguage

# A query match: capture name -> the nodes it captured.
Captures = dict[str, list["Node"]]
# kind, captures, source -> kind (or None to drop the match)
KindFn = Callable[[str, Captures, bytes], str | None]
# kind, raw name, captures, source -> name
NameFn = Callable[[str, str, Captures, bytes], str]


@dataclass(frozen=True)
class Spec:
    name: str  # language shown in results
    grammar: SupportedLanguage  # tree-sitter-language-pack name
    query: str
    method_parents: frozenset[str] = frozenset()
    qualified_kinds: frozenset[str] = frozenset()  # nested names joined with "." (Elixir modules)
    kind_fn: KindFn | None = None
    name_fn: NameFn | None = None


def _text(node: Node, src: bytes) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


# -- Python ----------------------------------------------------------------

PYTHON = """
(function_definition name: (identifier) @name) @function
(class_definition name: (identifier) @name) @class
(module (assignment left: (identifier) @name) @variable)
(module (expression_statement (assignment left: (identifier) @name)) @variable)
(import_statement name: (_) @name) @import
(import_from_statement module_name: (_) @name) @import
(future_import_statement) @import
"""


def _python_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind == "import" and not name:
        return "__future__"
    return name


# -- Rust ------------------------------------------------------------------

RUST = """
(function_item name: (identifier) @name) @function
(function_signature_item name: (identifier) @name) @function
(struct_item name: (type_identifier) @name) @struct
(enum_item name: (type_identifier) @name) @enum
(union_item name: (type_identifier) @name) @union
(trait_item name: (type_identifier) @name) @trait
(impl_item type: (_) @name) @impl
(mod_item name: (identifier) @name) @module
(type_item name: (type_identifier) @name) @type
(const_item name: (identifier) @name) @constant
(static_item name: (identifier) @name) @static
(macro_definition name: (identifier) @name) @macro
(use_declaration argument: (_) @name) @import
(extern_crate_declaration name: (identifier) @name) @import
"""


def _rust_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind == "impl":
        node = caps["impl"][0]
        trait = node.child_by_field_name("trait")
        if trait is not None:
            return f"{_text(trait, src)} for {name}"
    return name


# -- Go ----------------------------------------------------------------------

GO = """
(function_declaration name: (identifier) @name) @function
(method_declaration name: (field_identifier) @name) @method
(type_spec name: (type_identifier) @name type: (_) @_type) @type
(type_alias name: (type_identifier) @name) @type
(source_file (const_declaration (const_spec name: (identifier) @name) @constant))
(source_file (var_declaration (var_spec name: (identifier) @name) @variable))
(import_spec path: (_) @name) @import
"""


def _go_kind(kind: str, caps: Captures, src: bytes) -> str | None:
    if kind == "type" and "_type" in caps:
        t = caps["_type"][0].type
        if t == "struct_type":
            return "struct"
        if t == "interface_type":
            return "interface"
    return kind


# -- Zig ---------------------------------------------------------------------

ZIG = """
(Decl (FnProto function: (IDENTIFIER) @name)) @function
(Decl (VarDecl variable_type_function: (IDENTIFIER) @name) @constant)
(TestDecl (STRINGLITERALSINGLE)? @name) @test
(SuffixExpr (BUILTINIDENTIFIER) @_b (#eq? @_b "@import")
  (FnCallArguments (ErrorUnionExpr (SuffixExpr (STRINGLITERALSINGLE) @name)))) @import
"""


def _zig_kind(kind: str, caps: Captures, src: bytes) -> str | None:
    if kind == "constant":
        node = caps["constant"][0]
        text = _text(node, src)
        if "@import(" in text.split("\n", 1)[0]:
            return None  # listed as the import
        for word in ("struct", "enum", "union", "opaque"):
            if f"= {word}" in text or f"= packed {word}" in text or f"= extern {word}" in text:
                return word
        return "variable" if text.startswith("var") else "constant"
    return kind


def _zig_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind == "test" and not name:
        return "test"
    return name


# -- C and C++ -------------------------------------------------------------

_C_COMMON = """
(function_definition declarator: [
  (function_declarator declarator: (_) @name)
  (pointer_declarator declarator: (function_declarator declarator: (_) @name))
  (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (_) @name)))
]) @function
(translation_unit (declaration declarator: [
  (function_declarator declarator: (identifier) @name)
  (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
]) @function)
(struct_specifier name: (_) @name body: (_)) @struct
(union_specifier name: (_) @name body: (_)) @union
(enum_specifier name: (_) @name body: (_)) @enum
(type_definition declarator: (type_identifier) @name) @type
(preproc_def name: (identifier) @name) @macro
(preproc_function_def name: (identifier) @name) @macro
(preproc_include path: (_) @name) @import
"""

C = _C_COMMON

CPP = (
    _C_COMMON
    + """
(class_specifier name: (_) @name body: (_)) @class
(namespace_definition name: (_) @name) @namespace
(field_declaration declarator: (function_declarator declarator: (_) @name)) @function
(alias_declaration name: (type_identifier) @name) @type
(concept_definition name: (identifier) @name) @concept
(using_declaration) @import
"""
)

# -- JavaScript / TypeScript -----------------------------------------------

_JS_COMMON = """
(function_declaration name: (identifier) @name) @function
(generator_function_declaration name: (identifier) @name) @function
(class_declaration name: (_) @name) @class
(method_definition name: (_) @name) @method
(lexical_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @function
(variable_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @function
(program (lexical_declaration (variable_declarator name: (identifier) @name)) @variable)
(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @name)) @variable))
(export_statement "default" value: (object) @_obj) @object
(import_statement source: (string) @name) @import
(export_statement source: (string) @name) @import
(call_expression function: (identifier) @_f (#eq? @_f "require") arguments: (arguments . (string) @name)) @import
(call_expression function: (import) arguments: (arguments . (_) @name)) @import
"""

JAVASCRIPT = _JS_COMMON

TYPESCRIPT = (
    _JS_COMMON
    + """
(abstract_class_declaration name: (_) @name) @class
(interface_declaration name: (_) @name) @interface
(type_alias_declaration name: (_) @name) @type
(enum_declaration name: (_) @name) @enum
(internal_module name: (_) @name) @namespace
(module name: (_) @name) @module
(function_signature name: (_) @name) @function
(method_signature name: (_) @name) @method
(abstract_method_signature name: (_) @name) @method
(import_require_clause source: (string) @name) @import
"""
)


def _js_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind == "object" and not name:
        return "default"
    return name


# -- Elixir ------------------------------------------------------------------

ELIXIR = """
(call target: (identifier) @_kw
  (#any-of? @_kw "defmodule" "defprotocol")
  (arguments . (alias) @name)) @module
(call target: (identifier) @_kw (#eq? @_kw "defimpl")
  (arguments . (alias) @name)) @impl
(call target: (identifier) @_kw
  (#any-of? @_kw "def" "defp" "defmacro" "defmacrop" "defguard" "defguardp" "defdelegate" "defn" "defnp")
  (arguments . [
    (identifier) @name
    (call target: (identifier) @name)
    (binary_operator left: (call target: (identifier) @name))
    (binary_operator left: (identifier) @name)
  ])) @function
(call target: (identifier) @_kw (#any-of? @_kw "defstruct" "defexception")) @struct
(unary_operator operand: (call target: (identifier) @_kw
  (#any-of? @_kw "type" "typep" "opaque" "callback" "macrocallback")
  (arguments . [
    (binary_operator left: [(identifier) @name (call target: (identifier) @name)])
    (identifier) @name
    (call target: (identifier) @name)
  ]))) @type
(call target: (identifier) @_kw (#any-of? @_kw "alias" "import" "require" "use")
  (arguments . (_) @name)) @import
(sigil (sigil_name) @_s (#eq? @_s "H") (quoted_content) @embed.heex)
"""

_ELIXIR_KINDS = {
    "defp": "function",
    "def": "function",
    "defdelegate": "function",
    "defn": "function",
    "defnp": "function",
    "defmacro": "macro",
    "defmacrop": "macro",
    "defguard": "guard",
    "defguardp": "guard",
    "defprotocol": "protocol",
    "defmodule": "module",
    "defexception": "exception",
    "defstruct": "struct",
    "callback": "callback",
    "macrocallback": "callback",
}


def _elixir_kind(kind: str, caps: Captures, src: bytes) -> str | None:
    kw = caps.get("_kw")
    if kw and kind != "import":
        return _ELIXIR_KINDS.get(_text(kw[0], src), kind)
    return kind


def _elixir_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind in ("function", "macro", "guard"):
        node = caps["name"][0]
        parent = node.parent
        arity = 0
        if parent is not None and parent.type == "call":
            for child in parent.named_children:
                if child.type == "arguments":
                    arity = child.named_child_count
                    break
        return f"{name}/{arity}"
    if kind in ("struct", "exception"):
        return _text(caps["_kw"][0], src)
    return name


# -- HEEx / EEx / HTML -------------------------------------------------------

HEEX = """
(component [(start_component (component_name) @name) (self_closing_component (component_name) @name)]) @component
(slot [(start_slot (slot_name) @name) (self_closing_slot (slot_name) @name)]) @slot
(tag (start_tag (tag_name) @_t (#eq? @_t "script"))) @region.javascript
(tag (start_tag (tag_name) @_t (#eq? @_t "style"))) @region.css
"""


def _heex_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind == "slot":
        return ":" + name
    return name


EEX = """
(output_directive (code) @name) @expression
(directive (code) @name) @expression
"""

_EEX_CLOSERS = {"end", "else", "end)", "end }", "}", "after", "catch", "rescue"}


def _eex_kind(kind: str, caps: Captures, src: bytes) -> str | None:
    code = _text(caps["name"][0], src).strip()
    if not code or code in _EEX_CLOSERS or code.startswith("end "):
        return None
    return kind


def _eex_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    text = " ".join(name.split())
    return text[:80]


HTML = """
(script_element) @region.javascript
(style_element) @region.css
"""

# -- Ruby ----------------------------------------------------------------------

RUBY = """
(method name: (_) @name) @function
(singleton_method name: (_) @name) @function
(class name: (_) @name) @class
(module name: (_) @name) @module
(assignment left: (constant) @name) @constant
(call method: (identifier) @_m (#any-of? @_m "require" "require_relative" "load")
  arguments: (argument_list . (_) @name)) @import
"""


def _ruby_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind == "function" and "function" in caps:
        node = caps["function"][0]
        if node.type == "singleton_method":
            obj = node.child_by_field_name("object")
            if obj is not None:
                return f"{_text(obj, src)}.{name}"
    return name


# -- PHP -------------------------------------------------------------------------

PHP = """
(namespace_definition name: (_) @name) @namespace
(class_declaration name: (name) @name) @class
(interface_declaration name: (name) @name) @interface
(trait_declaration name: (name) @name) @trait
(enum_declaration name: (name) @name) @enum
(function_definition name: (name) @name) @function
(method_declaration name: (name) @name) @method
(const_declaration (const_element (name) @name)) @constant
(namespace_use_clause) @import
(require_expression (_) @name) @import
(require_once_expression (_) @name) @import
(include_expression (_) @name) @import
(include_once_expression (_) @name) @import
"""

# -- Bash ----------------------------------------------------------------------

BASH = """
(function_definition name: (word) @name) @function
(command name: (command_name) @_c (#any-of? @_c "source" ".") argument: (_) @name) @import
"""


def _bash_kind(kind: str, caps: Captures, src: bytes) -> str | None:
    if kind == "import":
        # only the first argument is the sourced file
        cmd = caps["import"][0]
        first = cmd.child_by_field_name("argument")
        if first is not None and first.start_byte != caps["name"][0].start_byte:
            return None
    return kind


# -- CSS / SCSS --------------------------------------------------------------------

CSS = """
(rule_set (selectors) @name) @rule
(media_statement) @media
(keyframes_statement (keyframes_name) @name) @keyframes
(supports_statement) @supports
(import_statement (_) @name) @import
"""

SCSS = (
    CSS
    + """
(mixin_statement name: (_) @name) @mixin
(function_statement name: (_) @name) @function
(stylesheet (declaration (property_name) @name) @variable)
(use_statement (_) @name) @import
(forward_statement (_) @name) @import
"""
)


def _css_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind in ("media", "supports") and not name:
        node = caps[kind][0]
        head = _text(node, src).split("{", 1)[0]
        return " ".join(head.split()[1:]) or kind
    return " ".join(name.split())


# -- Racket ------------------------------------------------------------------------

RACKET = """
(list . (symbol) @_kw
  (#any-of? @_kw "define" "define/contract" "define/public" "define/private" "define/override"
     "define-syntax" "define-syntax-rule" "define-for-syntax" "define-values"
     "struct" "define-struct" "module" "module*" "module+" "define-type")
  . [(symbol) @name (list . (symbol) @name) (list . (list . (symbol) @name))]) @function
(list . (symbol) @_kw (#any-of? @_kw "require") (_) @name) @import
"""


def _racket_kind(kind: str, caps: Captures, src: bytes) -> str | None:
    if kind == "import":
        return kind
    kw = _text(caps["_kw"][0], src)
    if kw.startswith("define-syntax") or kw == "define-for-syntax":
        return "macro"
    if kw in ("struct", "define-struct"):
        return "struct"
    if kw.startswith("module"):
        return "module"
    if kw == "define-type":
        return "type"
    if kw == "define-values":
        return "variable"
    name = caps["name"][0]
    if (
        name.parent is not None
        and name.parent.type == "list"
        and name.parent.start_byte != caps["function"][0].start_byte
    ):
        return "function"  # (define (f x) ...)
    value = caps["function"][0].named_children
    if (
        len(value) >= 3
        and value[2].type == "list"
        and _text(value[2], src).startswith(("(lambda", "(λ", "(case-lambda"))
    ):
        return "function"
    return "variable"


# -- SQL -------------------------------------------------------------------------------

SQL = """
(create_table (object_reference) @name) @table
(create_view (object_reference) @name) @view
(create_materialized_view (object_reference) @name) @view
(create_function (object_reference) @name) @function
(create_index column: (identifier) @name) @index
(create_type (object_reference) @name) @type
(create_schema (identifier) @name) @schema
(create_trigger (object_reference) @name) @trigger
(create_sequence (object_reference) @name) @sequence
"""

# -- Java / Kotlin / C# / Swift / Scala / Lua ---------------------------------------

JAVA = """
(class_declaration name: (_) @name) @class
(interface_declaration name: (_) @name) @interface
(enum_declaration name: (_) @name) @enum
(record_declaration name: (_) @name) @record
(annotation_type_declaration name: (_) @name) @annotation
(method_declaration name: (_) @name) @method
(constructor_declaration name: (_) @name) @constructor
(import_declaration (_) @name) @import
"""

KOTLIN = """
(class_declaration (type_identifier) @name) @class
(object_declaration (type_identifier) @name) @object
(companion_object) @object
(function_declaration (simple_identifier) @name) @function
(source_file (property_declaration (variable_declaration (simple_identifier) @name)) @property)
(type_alias (type_identifier) @name) @type
(import_header (identifier) @name) @import
"""


def _kotlin_kind(kind: str, caps: Captures, src: bytes) -> str | None:
    if kind == "class":
        node = caps["class"][0]
        for child in node.children:
            if child.type in ("interface", "class", "enum"):
                return "interface" if child.type == "interface" else kind
            if child.type == "type_identifier":
                break
        head = _text(node, src)
        if " interface " in f" {head.split('{', 1)[0]} ".replace("\n", " "):
            return "interface"
    return kind


def _kotlin_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind == "object" and not name:
        return "Companion"
    return name


CSHARP = """
(namespace_declaration name: (_) @name) @namespace
(file_scoped_namespace_declaration name: (_) @name) @namespace
(class_declaration name: (_) @name) @class
(interface_declaration name: (_) @name) @interface
(struct_declaration name: (_) @name) @struct
(enum_declaration name: (_) @name) @enum
(record_declaration name: (_) @name) @record
(method_declaration name: (_) @name) @method
(constructor_declaration name: (_) @name) @constructor
(property_declaration name: (_) @name) @property
(using_directive (_) @name) @import
"""

SWIFT = """
(class_declaration name: (_) @name) @class
(protocol_declaration name: (_) @name) @protocol
(function_declaration name: (simple_identifier) @name) @function
(protocol_function_declaration name: (simple_identifier) @name) @function
(init_declaration) @constructor
(typealias_declaration name: (_) @name) @type
(import_declaration (identifier) @name) @import
"""


def _swift_kind(kind: str, caps: Captures, src: bytes) -> str | None:
    if kind == "class":
        node = caps["class"][0]
        for child in node.children:
            if child.type in ("struct", "enum", "extension", "class", "actor"):
                return child.type
    return kind


def _swift_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    return name or ("init" if kind == "constructor" else name)


SCALA = """
(object_definition name: (_) @name) @object
(class_definition name: (_) @name) @class
(trait_definition name: (_) @name) @trait
(enum_definition name: (_) @name) @enum
(function_definition name: (_) @name) @function
(function_declaration name: (_) @name) @function
(type_definition name: (_) @name) @type
(compilation_unit (val_definition pattern: (identifier) @name) @value)
(template_body (val_definition pattern: (identifier) @name) @value)
(import_declaration) @import
"""

LUA = """
(function_declaration name: (_) @name) @function
(assignment_statement (variable_list name: (_) @name)
  (expression_list value: (function_definition))) @function
(function_call name: (identifier) @_f (#eq? @_f "require") arguments: (arguments . (_) @name)) @import
"""

_METHODS_OOP = frozenset(
    {
        "class",
        "interface",
        "trait",
        "object",
        "struct",
        "enum",
        "record",
        "impl",
        "protocol",
        "extension",
        "actor",
        "module",
    }
)


def _scala_name(kind: str, name: str, caps: Captures, src: bytes) -> str:
    if kind == "import" and not name:
        text = " ".join(_text(caps["import"][0], src).split())
        return text[len("import ") :] if text.startswith("import ") else text
    return name


def _strip_keyword(keyword: str) -> NameFn:
    def name_fn(kind: str, name: str, caps: Captures, src: bytes) -> str:
        if kind == "import" and not name:
            text = " ".join(_text(caps["import"][0], src).split()).rstrip(";")
            return text[len(keyword) :].strip() if text.startswith(keyword) else text
        return name

    return name_fn


SPECS: dict[str, Spec] = {
    s.name: s
    for s in [
        Spec("python", "python", PYTHON, method_parents=frozenset({"class"}), name_fn=_python_name),
        Spec("rust", "rust", RUST, method_parents=frozenset({"impl", "trait"}), name_fn=_rust_name),
        Spec("go", "go", GO, kind_fn=_go_kind),
        Spec(
            "zig",
            "zig",
            ZIG,
            method_parents=frozenset({"struct", "enum", "union", "opaque"}),
            kind_fn=_zig_kind,
            name_fn=_zig_name,
        ),
        Spec("c", "c", C),
        Spec(
            "cpp",
            "cpp",
            CPP,
            method_parents=frozenset({"class", "struct", "union"}),
            name_fn=_strip_keyword("using"),
        ),
        Spec(
            "javascript",
            "javascript",
            JAVASCRIPT,
            method_parents=frozenset({"class", "object"}),
            name_fn=_js_name,
        ),
        Spec(
            "typescript",
            "typescript",
            TYPESCRIPT,
            method_parents=frozenset({"class", "object", "interface"}),
            name_fn=_js_name,
        ),
        Spec(
            "tsx",
            "tsx",
            TYPESCRIPT,
            method_parents=frozenset({"class", "object", "interface"}),
            name_fn=_js_name,
        ),
        Spec(
            "elixir",
            "elixir",
            ELIXIR,
            qualified_kinds=frozenset({"module", "protocol"}),
            kind_fn=_elixir_kind,
            name_fn=_elixir_name,
        ),
        Spec("heex", "heex", HEEX, name_fn=_heex_name),
        Spec("eex", "embeddedtemplate", EEX, kind_fn=_eex_kind, name_fn=_eex_name),
        Spec("html", "html", HTML),
        Spec(
            "ruby", "ruby", RUBY, method_parents=frozenset({"class", "module"}), name_fn=_ruby_name
        ),
        Spec("php", "php", PHP, name_fn=_strip_keyword("use")),
        Spec("racket", "racket", RACKET, kind_fn=_racket_kind),
        Spec("sql", "sql", SQL),
        Spec("bash", "bash", BASH, kind_fn=_bash_kind),
        Spec("css", "css", CSS, name_fn=_css_name),
        Spec("scss", "scss", SCSS, name_fn=_css_name),
        Spec("java", "java", JAVA),
        Spec(
            "kotlin",
            "kotlin",
            KOTLIN,
            method_parents=_METHODS_OOP,
            kind_fn=_kotlin_kind,
            name_fn=_kotlin_name,
        ),
        Spec("csharp", "csharp", CSHARP),
        Spec(
            "swift",
            "swift",
            SWIFT,
            method_parents=_METHODS_OOP,
            kind_fn=_swift_kind,
            name_fn=_swift_name,
        ),
        Spec("scala", "scala", SCALA, method_parents=_METHODS_OOP, name_fn=_scala_name),
        Spec("lua", "lua", LUA),
    ]
}

EXTENSIONS: dict[str, str] = {
    ".rs": "rust",
    ".go": "go",
    ".zig": "zig",
    ".c": "c",
    ".h": "cpp",  # headers are parsed as C++ (a superset for declarations)
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".ipp": "cpp",
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".ex": "elixir",
    ".exs": "elixir",
    ".heex": "heex",
    ".eex": "eex",
    ".leex": "eex",
    ".html": "html",
    ".htm": "html",
    ".rb": "ruby",
    ".rake": "ruby",
    ".gemspec": "ruby",
    ".php": "php",
    ".rkt": "racket",
    ".sql": "sql",
    ".sh": "bash",
    ".bash": "bash",
    ".css": "css",
    ".scss": "scss",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".cs": "csharp",
    ".swift": "swift",
    ".scala": "scala",
    ".sc": "scala",
    ".lua": "lua",
}

FILENAMES: dict[str, str] = {"Rakefile": "ruby", "Gemfile": "ruby"}


def language_for(path: str) -> str | None:
    """The language of a checkout-relative path, or None when unsupported."""
    base = path.rsplit("/", 1)[-1]
    if base in FILENAMES:
        return FILENAMES[base]
    dot = base.rfind(".")
    if dot <= 0 and not base.startswith("."):
        return None
    return EXTENSIONS.get(base[dot:].lower()) if dot >= 0 else None
