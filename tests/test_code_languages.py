"""Each supported language: symbol kinds, names, nesting and import forms on a small real snippet."""

from __future__ import annotations

import pytest
from memtrio.actors.code.extract import Skipped, check_content, outline
from memtrio.actors.code.languages import SPECS, language_for

# language -> (file name, source, expected "line  kind name" rows, two spaces per nesting level)
CASES = {
    "rust": (
        "lib.rs",
        """\
use std::collections::HashMap;
extern crate serde;

pub struct Point<T> { x: T }

impl<T> Point<T> {
    pub fn new(x: T) -> Self { Point { x } }
}

pub trait Shape {
    fn area(&self) -> f64;
}

enum Color { Red }
mod util {}
const MAX: u32 = 10;
static NAME: &str = "x";
type Map = HashMap<String, u32>;
macro_rules! square { ($x:expr) => { $x * $x }; }
fn main() {}
""",
        [
            "1 import std::collections::HashMap",
            "2 import serde",
            "4 struct Point",
            "6 impl Point<T>",
            "7   method new",
            "10 trait Shape",
            "11   method area",
            "14 enum Color",
            "15 module util",
            "16 constant MAX",
            "17 static NAME",
            "18 type Map",
            "19 macro square",
            "20 function main",
        ],
    ),
    "go": (
        "main.go",
        """\
package main

import (
	"fmt"
	str "strings"
)

type Server struct {
	port int
}

type Handler interface {
	Serve() error
}

type ID = string

func (s *Server) Start(port int) error {
	return nil
}

func main() {
	fmt.Println(str.ToUpper("x"))
}

const Version = "1"
var Debug bool
""",
        [
            '4 import "fmt"',
            '5 import "strings"',
            "8 struct Server",
            "12 interface Handler",
            "16 type ID",
            "18 method Start",
            "22 function main",
            "26 constant Version",
            "27 variable Debug",
        ],
    ),
    "zig": (
        "main.zig",
        """\
const std = @import("std");

pub const Point = struct {
    x: i32,
    pub fn init(x: i32) Point {
        return .{ .x = x };
    }
};

const Mode = enum { fast, slow };

pub fn main() !void {}

test "point init" {}

var counter: u32 = 0;
""",
        [
            '1 import "std"',
            "3 struct Point",
            "5   method init",
            "10 enum Mode",
            "12 function main",
            '14 test "point init"',
            "16 variable counter",
        ],
    ),
    "c": (
        "util.c",
        """\
#include <stdio.h>
#include "util.h"

#define MAX 10
#define SQUARE(x) ((x) * (x))

struct point { int x; };
typedef struct point point_t;
enum color { RED };
union value { int i; float f; };

static int add(int a, int b) {
    return a + b;
}

char *name(void) { return 0; }

int prototype(int x);
""",
        [
            "1 import <stdio.h>",
            '2 import "util.h"',
            "4 macro MAX",
            "5 macro SQUARE",
            "7 struct point",
            "8 type point_t",
            "9 enum color",
            "10 union value",
            "12 function add",
            "16 function name",
            "18 function prototype",
        ],
    ),
    "cpp": (
        "shape.h",
        """\
#include <vector>

namespace geo {

class Shape {
public:
    virtual double area() const = 0;
    int sides() const { return 0; }
};

struct Point { int x; };

template <typename T>
T twice(T x) { return x + x; }

using Size = unsigned long;

}

double geo::Circle::area() const { return 3.14; }
""",
        [
            "1 import <vector>",
            "3 namespace geo",
            "5   class Shape",
            "7     method area",
            "8     method sides",
            "11   struct Point",
            "14   function twice",
            "16   type Size",
            "20 function geo::Circle::area",
        ],
    ),
    "python": (
        "app.py",
        """\
import os
import numpy as np, sys
from .models import User
from __future__ import annotations

TIMEOUT = 30

@dataclass
class Config(Base):
    name: str

    def load(self, path: str) -> "Config":
        return self

    class Meta:
        pass

async def main():
    def helper():
        pass
""",
        [
            "1 import os",
            "2 import numpy as np",
            "2 import sys",
            "3 import .models",
            "4 import __future__",
            "6 variable TIMEOUT",
            "9 class Config",
            "12   method load",
            "15   class Meta",
            "18 function main",
            "19   function helper",
        ],
    ),
    "javascript": (
        "app.jsx",
        """\
import React, { useState } from "react";
export { helper } from "./helper";
const fs = require("fs");
const lazy = import("./lazy");

export const VERSION = "1.0";
export function App({ title }) {
  return <h1>{title}</h1>;
}
const add = (a, b) => a + b;
class Store extends Base {
  get(key) { return key; }
  static create() {}
}
function* ids() {}
export default {
  name: "x",
  data() { return {}; },
};
""",
        [
            '1 import "react"',
            '2 import "./helper"',
            "3 variable fs",
            '3   import "fs"',
            "4 variable lazy",
            '4   import "./lazy"',
            "6 variable VERSION",
            "7 function App",
            "10 function add",
            "11 class Store",
            "12   method get",
            "13   method create",
            "15 function ids",
            "16 object default",
            "18   method data",
        ],
    ),
    "typescript": (
        "api.ts",
        """\
import type { User } from "./user";
import fs = require("fs");
export * from "./types";

export interface Repo<T> {
  find(id: string): Promise<T>;
}
export type Id = string;
enum Level { Low, High }
namespace Utils {
  export function clamp(x: number): number { return x; }
}
export abstract class Base {
  abstract run(): void;
  stop(): void {}
}
declare function external(x: number): void;
""",
        [
            '1 import "./user"',
            '2 import "fs"',
            '3 import "./types"',
            "5 interface Repo",
            "6   method find",
            "8 type Id",
            "9 enum Level",
            "10 namespace Utils",
            "11   function clamp",
            "13 class Base",
            "14   method run",
            "15   method stop",
            "17 function external",
        ],
    ),
    "tsx": (
        "Button.tsx",
        """\
import React from "react";

interface Props { label: string }

export const Button = ({ label }: Props) => <button>{label}</button>;

export default function Page() {
  return <Button label="x" />;
}
""",
        [
            '1 import "react"',
            "3 interface Props",
            "5 function Button",
            "7 function Page",
        ],
    ),
    "elixir": (
        "billing.ex",
        '''\
defmodule MyApp.Billing do
  alias MyApp.Repo
  import Ecto.Query
  require Logger
  use GenServer

  @type amount :: integer

  defmodule Invoice do
    defstruct [:total]
  end

  def charge(amount), do: amount

  defp secret(a, b) when a > b do
    a
  end

  defmacro debug(expr), do: expr
  def version, do: "1"

  def render(assigns) do
    ~H"""
    <.button phx-click="go">Go<:icon name="x" /></.button>
    """
  end
end
''',
        [
            "1 module MyApp.Billing",
            "2   import MyApp.Repo",
            "3   import Ecto.Query",
            "4   import Logger",
            "5   import GenServer",
            "7   type amount",
            "9   module MyApp.Billing.Invoice",
            "10     struct defstruct",
            "13   function charge/1",
            "15   function secret/2",
            "19   macro debug/1",
            "20   function version/0",
            "22   function render/1",
            "24     component .button",
            "24       slot :icon",
        ],
    ),
    "heex": (
        "card.html.heex",
        """\
<.card title={@title}>
  <:header>Hi</:header>
  <MyAppWeb.Icons.star />
</.card>
<script>
  function track(event) { return event; }
</script>
<style>
  .card { color: red; }
</style>
""",
        [
            "1 component .card",
            "2   slot :header",
            "3   component MyAppWeb.Icons.star",
            "6 function track",
            "9 rule .card",
        ],
    ),
    "eex": (
        "index.html.eex",
        """\
<h1><%= @title %></h1>
<%= for item <- @items do %>
  <li><%= item.name %></li>
<% end %>
<%# a comment %>
""",
        [
            "1 expression @title",
            "2 expression for item <- @items do",
            "3 expression item.name",
        ],
    ),
    "html": (
        "index.html",
        """\
<!doctype html>
<html>
<head>
<style>
body { margin: 0; }
</style>
</head>
<body>
<script type="module">
import { start } from "./app.js";
function boot() { start(); }
</script>
</body>
</html>
""",
        [
            "5 rule body",
            '10 import "./app.js"',
            "11 function boot",
        ],
    ),
    "ruby": (
        "user.rb",
        """\
require "json"
require_relative "base"
load "tasks.rb"

module Accounts
  class User < Base
    ROLE = "admin"

    def self.find(id)
      new
    end

    def name
      @name
    end
  end
end

def helper(x) = x
""",
        [
            '1 import "json"',
            '2 import "base"',
            '3 import "tasks.rb"',
            "5 module Accounts",
            "6   class User",
            "7     constant ROLE",
            "9     method self.find",
            "13     method name",
            "19 function helper",
        ],
    ),
    "php": (
        "User.php",
        """\
<?php
namespace App\\Models;

use Illuminate\\Support\\Str;
require "config.php";
require_once "db.php";
include "view.php";
include_once "helpers.php";

interface HasName {}
trait Greets {}
enum Status {}

class User extends Model implements HasName {
    const TABLE = "users";
    public function name(string $x): string { return $x; }
}

function helper() {}
""",
        [
            "2 namespace App\\Models",
            "4 import Illuminate\\Support\\Str",
            '5 import "config.php"',
            '6 import "db.php"',
            '7 import "view.php"',
            '8 import "helpers.php"',
            "10 interface HasName",
            "11 trait Greets",
            "12 enum Status",
            "14 class User",
            "15   constant TABLE",
            "16   method name",
            "19 function helper",
        ],
    ),
    "racket": (
        "main.rkt",
        """\
#lang racket
(require racket/list "util.rkt")

(define (square x) (* x x))
(define pi 3.14)
(define add (lambda (a b) (+ a b)))
(struct point (x y))
(define-syntax-rule (swap! a b) (void))
(module+ test
  (define (check) #t))
""",
        [
            "2 import racket/list",
            '2 import "util.rkt"',
            "4 function square",
            "5 variable pi",
            "6 function add",
            "7 struct point",
            "8 macro swap!",
            "9 module test",
            "10   function check",
        ],
    ),
    "sql": (
        "schema.sql",
        """\
CREATE TABLE public.users (
  id integer PRIMARY KEY
);

CREATE VIEW active_users AS SELECT * FROM public.users;

CREATE INDEX users_id_idx ON public.users (id);

CREATE FUNCTION add(a integer, b integer) RETURNS integer AS $$ SELECT a + b $$ LANGUAGE sql;
""",
        [
            "1 table public.users",
            "5 view active_users",
            "7 index users_id_idx",
            "9 function add",
        ],
    ),
    "bash": (
        "deploy.sh",
        """\
#!/bin/bash
source ./env.sh
. "$HOME/.profile"

deploy() {
  echo "$1"
}

function cleanup {
  rm -f /tmp/x
}
""",
        [
            "2 import ./env.sh",
            '3 import "$HOME/.profile"',
            "5 function deploy",
            "9 function cleanup",
        ],
    ),
    "css": (
        "site.css",
        """\
@import url("reset.css");

.card, .panel > h1 {
  color: red;
}

@media (max-width: 600px) {
  .card { color: blue; }
}

@keyframes spin {
  from { opacity: 0; }
}
""",
        [
            '1 import url("reset.css")',
            "3 rule .card, .panel > h1",
            "7 media (max-width: 600px)",
            "8   rule .card",
            "11 keyframes spin",
        ],
    ),
    "scss": (
        "site.scss",
        """\
@use "sass:math";
@forward "src/list";

$primary: #333;

@mixin theme($color) {
  color: $color;
}

@function double($n) {
  @return $n * 2;
}

.nav {
  .item { color: red; }
  &:hover { color: blue; }
}
""",
        [
            '1 import "sass:math"',
            '2 import "src/list"',
            "4 variable $primary",
            "6 mixin theme",
            "10 function double",
            "14 rule .nav",
            "15   rule .item",
            "16   rule &:hover",
        ],
    ),
    "java": (
        "Store.java",
        """\
package app;

import java.util.List;
import static java.lang.Math.max;

public class Store {
    public Store() {}
    public List<String> items(int n) { return null; }
    interface Listener {}
    enum Mode { A }
    record Pair(int a, int b) {}
}
""",
        [
            "3 import java.util.List",
            "4 import java.lang.Math.max",
            "6 class Store",
            "7   constructor Store",
            "8   method items",
            "9   interface Listener",
            "10   enum Mode",
            "11   record Pair",
        ],
    ),
    "kotlin": (
        "Main.kt",
        """\
package app

import kotlinx.coroutines.launch

class Repo(val url: String) {
    fun fetch(id: Int): String = url
    companion object {}
}

object Registry

fun main() {}

val VERSION = "1"
typealias Ids = List<Int>
""",
        [
            "3 import kotlinx.coroutines.launch",
            "5 class Repo",
            "6   method fetch",
            "7   object Companion",
            "10 object Registry",
            "12 function main",
            "14 property VERSION",
            "15 type Ids",
        ],
    ),
    "csharp": (
        "Store.cs",
        """\
using System.Text;

namespace App
{
    public class Store
    {
        public Store() {}
        public int Count { get; set; }
        public void Add(int item) {}
    }
    interface IRepo {}
    struct Point {}
    enum Mode { A }
    record Pair(int A, int B);
}
""",
        [
            "1 import System.Text",
            "3 namespace App",
            "5   class Store",
            "7     constructor Store",
            "8     property Count",
            "9     method Add",
            "11   interface IRepo",
            "12   struct Point",
            "13   enum Mode",
            "14   record Pair",
        ],
    ),
    "swift": (
        "Store.swift",
        """\
import Foundation

class Store: Base {
    init() {}
    func add(item: Int) -> Bool { true }
}

struct Point {}
protocol Shape {
    func area() -> Double
}
enum Mode { case a }
extension Store {}
func main() {}
""",
        [
            "1 import Foundation",
            "3 class Store",
            "4   constructor init",
            "5   method add",
            "8 struct Point",
            "9 protocol Shape",
            "10   method area",
            "12 enum Mode",
            "13 extension Store",
            "14 function main",
        ],
    ),
    "scala": (
        "Main.scala",
        """\
package app

import scala.collection.mutable

object Main {
  def run(args: Array[String]): Unit = ()
}

class Store(n: Int)
trait Shape
case class Point(x: Int)
val Version = "1"
""",
        [
            "3 import scala.collection.mutable",
            "5 object Main",
            "6   method run",
            "9 class Store",
            "10 trait Shape",
            "11 class Point",
            "12 value Version",
        ],
    ),
    "lua": (
        "init.lua",
        """\
local json = require("json")
local M = {}

function M.encode(value)
  return json.encode(value)
end

local function helper() end

local handler = function(event) end

return M
""",
        [
            '1 import "json"',
            "4 function M.encode",
            "8 function helper",
            "10 function handler",
        ],
    ),
}


@pytest.mark.parametrize("language", sorted(CASES))
def test_language_outline(language: str) -> None:
    name, source, expected = CASES[language]
    assert language_for(name) == language
    result = outline(language, source.encode())
    assert result.coverage == "complete"
    got = [f"{s.start} {'  ' * s.depth}{s.kind} {s.name}" for s in result.symbols]
    assert got == expected


def test_every_language_has_a_case() -> None:
    assert sorted(CASES) == sorted(SPECS)


def test_signature_shown_only_when_it_says_more_than_the_name() -> None:
    source = b"class Plain:\n    pass\n\nclass Child(Base):\n    def run(self, n: int) -> None:\n        pass\n"
    symbols = {s.name: s.signature for s in outline("python", source).symbols}
    assert symbols == {
        "Plain": "",
        "Child": "class Child(Base):",
        "run": "def run(self, n: int) -> None:",
    }
    rust = outline("rust", b"use std::io;\nmod m {\n}\n").symbols
    assert [(s.kind, s.signature) for s in rust] == [("import", ""), ("module", "")]


def test_elixir_nested_module_names_and_arity() -> None:
    source = (
        b"defmodule A do\n  defmodule B do\n    def f(x, y), do: x\n    def g, do: 1\n  end\nend\n"
    )
    symbols = [(s.kind, s.name, s.parent) for s in outline("elixir", source).symbols]
    assert symbols == [
        ("module", "A", ""),
        ("module", "A.B", "A"),
        ("function", "f/2", "A.B"),
        ("function", "g/0", "A.B"),
    ]


def test_syntax_error_gives_partial_coverage_and_keeps_symbols() -> None:
    result = outline("python", b"def good():\n    pass\n\ndef broken(:\n    pass\n")
    assert result.coverage == "partial: syntax error at line 4"
    assert result.symbols[0].name == "good"


def test_header_h_is_cpp_and_unsupported_files_have_no_language() -> None:
    assert language_for("include/a.h") == "cpp"
    assert language_for("README.md") is None
    assert language_for("Makefile") is None
    assert language_for("Rakefile") == "ruby"


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("a.py", b"x = 1\0\n", "binary"),
        ("a.py", "x = 'é'\n".encode("latin-1"), "not UTF-8"),
        ("a.js", b"var a=1;" * 2000, "minified"),
        ("app.min.js", b"var a = 1;\n", "minified"),
        ("a.py", b"#" * (1024 * 1024 + 1), "larger than 1 MiB"),
    ],
)
def test_skipped_content(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(Skipped, match=reason):
        check_content(name, data)
