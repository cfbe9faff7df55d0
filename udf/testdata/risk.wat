;; An rsql wasm function module (docs/sql.md, "Functions": the calling convention).
;; Numbers are passed as wasm values; a VARCHAR argument as (pointer, length) of UTF-8
;; bytes the host wrote into memory it got from alloc; a VARCHAR result as one i64,
;; pointer << 32 | length. The module imports nothing.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))

  ;; alloc(n) returns n bytes for an argument. The host calls it for each VARCHAR
  ;; argument just before the call; the memory may be reused once the call returned
  ;; (the functions below reset the heap when they are done with their arguments).
  (func $alloc (export "alloc") (param $n i32) (result i32) (local $p i32)
    global.get $heap
    local.set $p
    global.get $heap
    local.get $n
    i32.add
    global.set $heap
    block $ok
      global.get $heap
      memory.size
      i32.const 16
      i32.shl
      i32.le_u
      br_if $ok
      global.get $heap
      memory.size
      i32.const 16
      i32.shl
      i32.sub
      i32.const 16
      i32.shr_u
      i32.const 1
      i32.add
      memory.grow
      i32.const -1
      i32.ne
      br_if $ok
      unreachable
    end
    local.get $p)

  (func $reset
    i32.const 1024
    global.set $heap)

  ;; risk(amount DOUBLE, country VARCHAR) RETURNS INT:
  ;; 3 when amount > 1000 and country is not 'DE', else 1.
  (func (export "risk") (param $amount f64) (param $c i32) (param $len i32) (result i32) (local $de i32)
    local.get $len
    i32.const 2
    i32.eq
    if (result i32)
      local.get $c
      i32.load8_u
      i32.const 68
      i32.eq
      local.get $c
      i32.load8_u offset=1
      i32.const 69
      i32.eq
      i32.and
    else
      i32.const 0
    end
    local.set $de
    call $reset
    local.get $amount
    f64.const 1000
    f64.gt
    local.get $de
    i32.eqz
    i32.and
    if (result i32)
      i32.const 3
    else
      i32.const 1
    end)

  ;; shout(s VARCHAR) RETURNS VARCHAR: s with ASCII letters upper-cased, in place.
  (func (export "shout") (param $p i32) (param $len i32) (result i64) (local $i i32) (local $b i32)
    block $done
      loop $next
        local.get $i
        local.get $len
        i32.ge_u
        br_if $done
        local.get $p
        local.get $i
        i32.add
        i32.load8_u
        local.tee $b
        i32.const 97
        i32.ge_u
        local.get $b
        i32.const 122
        i32.le_u
        i32.and
        if
          local.get $p
          local.get $i
          i32.add
          local.get $b
          i32.const 32
          i32.sub
          i32.store8
        end
        local.get $i
        i32.const 1
        i32.add
        local.set $i
        br $next
      end
    end
    call $reset
    local.get $p
    i64.extend_i32_u
    i64.const 32
    i64.shl
    local.get $len
    i64.extend_i32_u
    i64.or)

  ;; split(s VARCHAR) RETURNS TABLE (part VARCHAR): the parts of s between commas, as the
  ;; JSON array a wasm table function returns (["a","b"]; s must hold no quotes or
  ;; backslashes). The array is written after the argument, in memory alloc gave out.
  (func (export "split") (param $p i32) (param $len i32) (result i64) (local $i i32) (local $o i32) (local $b i32)
    local.get $p
    local.get $len
    i32.add
    local.set $o
    local.get $o
    i32.const 91
    i32.store8
    local.get $o
    i32.const 34
    i32.store8 offset=1
    i32.const 2
    local.set $b
    block $done
      loop $next
        local.get $i
        local.get $len
        i32.ge_u
        br_if $done
        local.get $p
        local.get $i
        i32.add
        i32.load8_u
        i32.const 44
        i32.eq
        if
          local.get $o
          local.get $b
          i32.add
          i32.const 34
          i32.store8
          local.get $o
          local.get $b
          i32.add
          i32.const 44
          i32.store8 offset=1
          local.get $o
          local.get $b
          i32.add
          i32.const 34
          i32.store8 offset=2
          local.get $b
          i32.const 3
          i32.add
          local.set $b
        else
          local.get $o
          local.get $b
          i32.add
          local.get $p
          local.get $i
          i32.add
          i32.load8_u
          i32.store8
          local.get $b
          i32.const 1
          i32.add
          local.set $b
        end
        local.get $i
        i32.const 1
        i32.add
        local.set $i
        br $next
      end
    end
    local.get $o
    local.get $b
    i32.add
    i32.const 34
    i32.store8
    local.get $o
    local.get $b
    i32.add
    i32.const 93
    i32.store8 offset=1
    local.get $b
    i32.const 2
    i32.add
    local.set $b
    call $reset
    local.get $o
    i64.extend_i32_u
    i64.const 32
    i64.shl
    local.get $b
    i64.extend_i32_u
    i64.or)

  ;; Misbehaving functions, for the tests: a trap, a loop that never ends, and one that
  ;; takes memory until there is no more.
  (func (export "boom") (param $x i64) (result i64)
    local.get $x
    i64.eqz
    if
      unreachable
    end
    local.get $x)
  (func (export "spin") (param $x i64) (result i64)
    local.get $x
    i64.eqz
    if
      loop $forever
        br $forever
      end
    end
    local.get $x)
  (func (export "hog") (param $x i64) (result i64)
    local.get $x
    i64.eqz
    if
      loop $more
        i32.const 1
        memory.grow
        i32.const -1
        i32.ne
        br_if $more
      end
      unreachable
    end
    local.get $x)

  ;; fan(x) = 2^x by a tree of calls without a loop: only the checks at function entries
  ;; stop fan(60).
  (func $fan (export "fan") (param $x i64) (result i64)
    local.get $x
    i64.eqz
    if (result i64)
      i64.const 1
    else
      local.get $x
      i64.const 1
      i64.sub
      call $fan
      local.get $x
      i64.const 1
      i64.sub
      call $fan
      i64.add
    end)
)
