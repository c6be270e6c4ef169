/* Modules written elsewhere, taken into ours. See module.h.
 *
 * A small scanner over MLIR's text form, enough for what jax.export prints and what StableHLO
 * users write: string literals ("..." with backslash escapes) are skipped whole, so that nothing
 * inside one is taken for a symbol, a location or a brace. */
#include "hlo/module.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

static tp_status_t *bad(const char *what) {
  return tp_make_status(TP_INVALID_ARGUMENT, "StableHLO module: %s", what);
}

/* The end of the string literal starting at |p| (on its opening quote). */
static const char *skip_string(const char *p) {
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && p[1]) p++;
  return *p ? p + 1 : p;
}

static bool ident_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.' || c == '-';
}

/* The position just past the bracket matching the one at |p| ('(', '{', '<' or '['), or NULL. */
static const char *match(const char *p) {
  const char open = *p, close = open == '(' ? ')' : open == '{' ? '}' : open == '<' ? '>' : ']';
  int depth = 0;
  for (; *p; p++) {
    if (*p == '"') {
      p = skip_string(p) - 1;
      continue;
    }
    if (open == '<' && *p == '-' && p[1] == '>') { /* an arrow inside a type: not a bracket */
      p++;
      continue;
    }
    if (*p == open) depth++;
    else if (*p == close && --depth == 0) return p + 1;
  }
  return NULL;
}

/* ---- types ---- */

static bool parse_dtype(const char *p, size_t n, tp_dtype_t *out) {
  for (int t = 0; t < TP_DTYPE_COUNT; t++) {
    const char *name = tp_dtype_hlo_name((tp_dtype_t)t);
    if (strlen(name) == n && strncmp(name, p, n) == 0) {
      *out = (tp_dtype_t)t;
      return true;
    }
  }
  return false;
}

/* "tensor<4x8xf32>" at |p| into |t|; returns the position after it, or NULL (|why| says). */
static const char *parse_type(const char *p, tp_hlo_type_t *t, const char **why) {
  while (isspace((unsigned char)*p)) p++;
  if (strncmp(p, "tensor<", 7) != 0) {
    *why = "a parameter or result that is not a tensor (a token or a tuple)";
    return NULL;
  }
  const char *end = match(p + 6);
  if (!end) {
    *why = "an unterminated tensor type";
    return NULL;
  }
  const char *q = p + 7, *close = end - 1;
  memset(t, 0, sizeof(*t));
  for (;;) {
    if (*q == '?') {
      *why = "a dynamic dimension (export with static shapes)";
      return NULL;
    }
    if (!isdigit((unsigned char)*q)) break;
    char *after;
    long long d = strtoll(q, &after, 10);
    if (*after != 'x') break; /* digits of the element type (i32) */
    if (t->ndim == TP_MAX_DIMS) {
      *why = "a tensor of more dimensions than 8";
      return NULL;
    }
    t->dims[t->ndim++] = d;
    q = after + 1;
  }
  /* The element type, up to the encoding (", #stablehlo...") or the closing bracket. */
  const char *e = q;
  while (e < close && *e != ',') {
    if (*e == '<') e = match(e);
    else e++;
    if (!e) break;
  }
  if (!e || !parse_dtype(q, (size_t)(e - q), &t->dtype)) {
    *why = "an element type torch has no dtype for";
    return NULL;
  }
  return end;
}

/* The public function @main: the position of its name's '@', or NULL. */
static const char *find_main(const char *text) {
  for (const char *p = text; *p; p++) {
    if (*p == '"') {
      p = skip_string(p) - 1;
      continue;
    }
    if (strncmp(p, "func.func", 9) != 0) continue;
    const char *q = p + 9;
    while (isspace((unsigned char)*q)) q++;
    if (strncmp(q, "public", 6) == 0) q += 6;
    while (isspace((unsigned char)*q)) q++;
    if (strncmp(q, "@main", 5) == 0 && !ident_char(q[5])) return q;
  }
  return NULL;
}

/* Skips an attribute dictionary and a location after a value's type. */
static const char *skip_attrs(const char *p) {
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (*p == '{') p = match(p);
    else if (strncmp(p, "loc(", 4) == 0) p = match(p + 3);
    else return p;
    if (!p) return NULL;
  }
}

tp_status_t *tp_hlo_module_signature(const char *text, tp_hlo_signature_t *out) {
  memset(out, 0, sizeof(*out));
  const char *why = NULL;
  const char *p = find_main(text);
  if (!p) return bad("no function @main");
  p = strchr(p, '(');
  if (!p) return bad("@main has no parameter list");
  const char *params_end = match(p);
  if (!params_end) return bad("@main's parameter list is unterminated");
  p++;
  while (p < params_end - 1) {
    while (isspace((unsigned char)*p)) p++;
    if (*p == ')') break;
    const char *colon = strchr(p, ':');
    if (!colon || colon > params_end) return bad("a parameter of @main without a type");
    if (out->n_params == TP_HLO_MODULE_MAX_VALUES) return bad("more than 16 parameters");
    p = parse_type(colon + 1, &out->params[out->n_params++], &why);
    if (!p) return bad(why);
    p = skip_attrs(p);
    if (!p) return bad("an unterminated parameter attribute");
    if (*p == ',') p++;
  }
  p = params_end;
  while (isspace((unsigned char)*p)) p++;
  if (strncmp(p, "->", 2) != 0) return bad("@main returns nothing");
  p += 2;
  while (isspace((unsigned char)*p)) p++;
  const bool list = *p == '(';
  const char *results_end = list ? match(p) : NULL;
  if (list && !results_end) return bad("@main's result list is unterminated");
  if (list) p++;
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (list && *p == ')') break;
    if (out->n_results == TP_HLO_MODULE_MAX_VALUES) return bad("more than 16 results");
    p = parse_type(p, &out->results[out->n_results++], &why);
    if (!p) return bad(why);
    if (!list) break;
    p = skip_attrs(p);
    if (!p) return bad("an unterminated result attribute");
    if (*p == ',') p++;
    else if (*p != ')') return bad("a malformed result list");
  }
  if (out->n_results == 0) return bad("@main returns nothing");
  return NULL;
}

/* ---- functions, renamed ---- */

typedef struct {
  char *data;
  size_t len, cap;
  bool failed;
} buf_t;

static void put(buf_t *b, const char *p, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
      b->failed = true;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
}

/* The module's body: what lies between the braces of its (first) `module` op, or the whole text
 * when it has none (bare functions). */
static bool module_body(const char *text, const char **start, const char **end) {
  for (const char *p = text; *p; p++) {
    if (*p == '"') {
      p = skip_string(p) - 1;
      continue;
    }
    if (*p == '#' && (p == text || p[-1] == '\n')) { /* an alias line: #loc1 = loc(...) */
      while (*p && *p != '\n') p++;
      if (!*p) break;
      continue;
    }
    if (strncmp(p, "module", 6) == 0 && !ident_char(p[6]) && (p == text || !ident_char(p[-1]))) {
      const char *q = p + 6;
      for (;;) { /* its name and attributes, up to the body's brace */
        while (isspace((unsigned char)*q)) q++;
        if (*q == '@') {
          q++;
          if (*q == '"') q = skip_string(q);
          else while (ident_char(*q)) q++;
        } else if (strncmp(q, "attributes", 10) == 0) {
          q += 10;
          while (isspace((unsigned char)*q)) q++;
          if (*q != '{' || !(q = match(q))) return false;
        } else {
          break;
        }
      }
      if (*q != '{') return false;
      const char *close = match(q);
      if (!close) return false;
      *start = q + 1;
      *end = close - 1;
      return true;
    }
    if (strncmp(p, "func.func", 9) == 0) break; /* bare functions */
  }
  *start = text;
  *end = text + strlen(text);
  return true;
}

tp_status_t *tp_hlo_module_functions(const char *text, const char *prefix, char **out) {
  *out = NULL;
  const char *p, *end;
  if (!module_body(text, &p, &end)) return bad("a malformed module op");
  if (!find_main(text)) return bad("no function @main");
  buf_t b = {0};
  const size_t np = strlen(prefix);
  while (p < end) {
    if (*p == '"') {
      const char *q = skip_string(p);
      put(&b, p, (size_t)(q - p));
      p = q;
    } else if (*p == '@') { /* a symbol, defined or referenced */
      put(&b, "@", 1);
      p++;
      if (*p == '"') {
        put(&b, "\"", 1);
        put(&b, prefix, np);
        const char *q = skip_string(p);
        put(&b, p + 1, (size_t)(q - p - 1));
        p = q;
      } else {
        put(&b, prefix, np);
      }
    } else if (strncmp(p, "loc(", 4) == 0 && (p == text || !ident_char(p[-1]))) {
      const char *q = match(p + 3); /* a location: dropped */
      if (!q) break;
      p = q;
    } else if (strncmp(p, "func.func", 9) == 0 && (p == text || !ident_char(p[-1]))) {
      /* Every function private: one program has one public entry, ours. */
      put(&b, "func.func private ", 18);
      p += 9;
      while (isspace((unsigned char)*p)) p++;
      if (strncmp(p, "public", 6) == 0 || strncmp(p, "private", 7) == 0)
        p += *p == 'p' && p[1] == 'u' ? 6 : 7;
      while (isspace((unsigned char)*p)) p++;
    } else if (*p == '#' && (p == text || p[-1] == '\n')) { /* an alias line */
      while (p < end && *p != '\n') p++;
    } else {
      put(&b, p, 1);
      p++;
    }
  }
  if (b.failed) {
    free(b.data);
    return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  }
  if (p < end) {
    free(b.data);
    return bad("an unterminated location");
  }
  *out = b.data ? b.data : strdup("");
  return NULL;
}

/* ---- the registry ---- */

/* g_lock guards g_modules, g_n and g_cap; a registered module is never changed or freed, so a
 * pointer lookup returns stays valid without it. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tp_hlo_module_t **g_modules;
static size_t g_n, g_cap;

static tp_hlo_module_t *find_locked(int64_t id) {
  for (size_t i = 0; i < g_n; i++)
    if (g_modules[i]->id == id) return g_modules[i];
  return NULL;
}

static void module_free(tp_hlo_module_t *m) {
  free(m->functions);
  free(m->text);
  free(m);
}

tp_status_t *tp_hlo_module_register(const char *text, int64_t *out_id) {
  *out_id = -1;
  tp_hlo_module_t *m = calloc(1, sizeof(*m));
  if (!m) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  m->id = (int64_t)(tp_hash_bytes(text, strlen(text), 0x6d6f64756c65ull) >> 1);
  char prefix[24];
  snprintf(prefix, sizeof(prefix), "k%016" PRIx64 "_", (uint64_t)m->id);
  snprintf(m->main, sizeof(m->main), "%smain", prefix);
  tp_status_t *st = tp_hlo_module_signature(text, &m->sig);
  if (!st) st = tp_hlo_module_functions(text, prefix, &m->functions);
  if (!st && !(m->text = strdup(text))) st = tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
  if (st) {
    module_free(m);
    return st;
  }
  pthread_mutex_lock(&g_lock);
  const tp_hlo_module_t *known = find_locked(m->id);
  if (!known && g_n == g_cap) {
    size_t cap = g_cap ? 2 * g_cap : 16;
    tp_hlo_module_t **d = realloc(g_modules, cap * sizeof(*d));
    if (d) g_modules = d, g_cap = cap;
  }
  const bool added = !known && g_n < g_cap;
  if (added) g_modules[g_n++] = m;
  pthread_mutex_unlock(&g_lock);
  if (!added) { /* registered before (the same text, or a hash collision), or no memory */
    const bool same = known && strcmp(known->text, text) == 0;
    const int64_t id = m->id;
    module_free(m);
    if (!known) return tp_make_status(TP_RESOURCE_EXHAUSTED, "out of host memory");
    if (!same) return tp_make_status(TP_INTERNAL, "two StableHLO modules share the id %" PRId64, id);
  }
  *out_id = known ? known->id : m->id;
  return NULL;
}

const tp_hlo_module_t *tp_hlo_module_lookup(int64_t id) {
  pthread_mutex_lock(&g_lock);
  const tp_hlo_module_t *m = find_locked(id);
  pthread_mutex_unlock(&g_lock);
  return m;
}
