/* Compiled parts of Qsim's output, each with a pure-Python twin that stays the reference
 * (docs/architecture.md, "Compiled parts"; docs/benchmarks.md, issue 13):
 *
 * JobLog writes the job log's Q, S and E records (cobaltlite/qsim/joblog.py,
 * PureAccountingObserver, gives the same bytes; tests/test_speedups.py checks it on random
 * jobs). The parts that depend on the locale, the time zone or rare input stay in Python and
 * are called back: record_stamp once per day (the clock part is formatted here) and for a time
 * with a fraction, format_hms once per distinct wall time, quote_value for a value that needs
 * quotes or is not ASCII, format_record for an id that is not an int. A, R and FAIL records are
 * formatted in Python and appended in order.
 *
 * Records are gathered as UTF-8 in one buffer and handed to a sink (AccountingLog's
 * write_encoded) as bytes in blocks.
 *
 * series_columns runs metrics.time_series' loop (below), easy_candidates the filter of the
 * flat EASY pass (Scheduler._easy_on_flat).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define BLOCK (256 * 1024) /* bytes gathered before the sink is called, at a job's E record */

/* ------------------------------------------------------------------ output buffer */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buffer;

static int buf_grow(Buffer *b, Py_ssize_t more) {
    Py_ssize_t cap = b->cap ? 2 * b->cap : 256;
    if (cap < b->len + more) cap = b->len + more;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(Buffer *b, Py_ssize_t more) {
    return b->len + more <= b->cap ? 0 : buf_grow(b, more);
}

static inline int buf_add(Buffer *b, const char *text, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, text, (size_t)n);
    b->len += n;
    return 0;
}

#define buf_lit(b, s) buf_add((b), (s), (Py_ssize_t)(sizeof(s) - 1))

/* The decimal digits of v (snprintf's format parsing was a tenth of the writer's time). */
static int buf_ll(Buffer *b, long long v) {
    char digits[24], *end = digits + sizeof digits, *at = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--at = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--at = '-';
    return buf_add(b, at, end - at);
}

/* Two digits of 0 <= v < 100. */
static int buf_2(Buffer *b, long long v) {
    char digits[2] = {(char)('0' + v / 10), (char)('0' + v % 10)};
    return buf_add(b, digits, 2);
}

/* str's UTF-8 bytes (a str only; its UTF-8 form is cached in the object) */
static int buf_str(Buffer *b, PyObject *text) {
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    if (utf8 == NULL) return -1;
    return buf_add(b, utf8, n);
}

/* ------------------------------------------------------------------ the JobLog type */

typedef struct {
    PyObject_HEAD
    PyObject *sink;          /* write_encoded(bytes) */
    PyObject *record_stamp;  /* record_stamp(when) -> "MM/DD/YYYY HH:MM:SS" */
    PyObject *quote_value;   /* quote_value(text) -> text as a record writes it */
    PyObject *format_hms;    /* format_hms(seconds) -> "HH:MM:SS" */
    PyObject *format_record; /* format_record(when, kind, id, fields), for odd ids */
    PyObject *parts;         /* jobid -> Parts of a job submitted and not ended */
    PyObject *walls;         /* wall time -> its format_hms as UTF-8 bytes */
    char stamp[64];          /* the last record's stamp */
    Py_ssize_t stamp_len;
    long long second, day;   /* the whole second and the day of that stamp ... */
    int second_valid, day_valid; /* ... if it was made here */
    char quoted[128];        /* for each ASCII code: does a value holding it need quotes */
    Buffer out;
    Buffer head, qtime, queue, user; /* a job's parts while submitted() makes them */
    PyObject *weakrefs;
    PyObject *dict;          /* instance dict, for Python subclasses' attributes */
} JobLog;

/* A job's texts shared by its S and E records, made once (PureAccountingObserver's
 * _parts) in one block: head = the fields from Resource_List.ncpus to cwd, then qtime, queue
 * and user as records write them; and the exec_host of its last start. */
typedef struct {
    PyObject_VAR_HEAD
    Py_ssize_t head_len, qtime_len, queue_len, user_len;
    PyObject *exec_host; /* quoted location (a str), or NULL before the first start */
    char data[1];
} Parts;

#define P_HEAD(p) ((p)->data)
#define P_QTIME(p) ((p)->data + (p)->head_len)
#define P_QUEUE(p) (P_QTIME(p) + (p)->qtime_len)
#define P_USER(p) (P_QUEUE(p) + (p)->queue_len)

static void parts_dealloc(Parts *p) {
    Py_XDECREF(p->exec_host); /* a str: Parts are in no reference cycle, so not GC-tracked */
    PyObject_Free(p);
}

static PyTypeObject PartsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cobaltlite._speedups._Parts",
    .tp_basicsize = offsetof(Parts, data),
    .tp_itemsize = 1,
    .tp_dealloc = (destructor)parts_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

/* `now` in whole seconds, if it is an int or a float without a fraction (1 if so, else 0). */
static int integral(PyObject *now, long long *second) {
    if (PyLong_CheckExact(now)) {
        int overflow;
        *second = PyLong_AsLongLongAndOverflow(now, &overflow);
        if (*second == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        return !overflow;
    }
    if (PyFloat_CheckExact(now)) {
        double d = PyFloat_AS_DOUBLE(now);
        if (d > -9e15 && d < 9e15 && d == floor(d)) {
            *second = (long long)d;
            return 1;
        }
    }
    return 0;
}

/* The record stamp of `now` (record_stamp's "MM/DD/YYYY HH:MM:SS"): for whole seconds, the
 * date through record_stamp once per day and the clock here; otherwise record_stamp's. */
static int set_stamp(JobLog *self, PyObject *now) {
    long long second;
    if (integral(now, &second)) {
        if (self->second_valid && second == self->second) return 0;
        long long day = second / 86400, in_day = second % 86400;
        if (in_day < 0) { /* floor division, as divmod does */
            day -= 1;
            in_day += 86400;
        }
        if (!self->day_valid || day != self->day) {
            PyObject *midnight = PyLong_FromLongLong(day * 86400);
            if (midnight == NULL) return -1;
            PyObject *stamp = PyObject_CallOneArg(self->record_stamp, midnight);
            Py_DECREF(midnight);
            if (stamp == NULL) return -1;
            Py_ssize_t n;
            const char *text = PyUnicode_Check(stamp) ? PyUnicode_AsUTF8AndSize(stamp, &n) : NULL;
            if (text == NULL || n != 19 || memcmp(text + 10, " 00:00:00", 9) != 0) {
                Py_DECREF(stamp);
                if (PyErr_Occurred()) return -1;
                goto general; /* a year of other than four digits: record_stamp's own way */
            }
            memcpy(self->stamp, text, 11); /* "MM/DD/YYYY " */
            Py_DECREF(stamp);
            self->day = day;
            self->day_valid = 1;
        }
        char *clock = self->stamp + 11;
        long long hour = in_day / 3600, minute = in_day % 3600 / 60, sec = in_day % 60;
        clock[0] = (char)('0' + hour / 10);
        clock[1] = (char)('0' + hour % 10);
        clock[2] = ':';
        clock[3] = (char)('0' + minute / 10);
        clock[4] = (char)('0' + minute % 10);
        clock[5] = ':';
        clock[6] = (char)('0' + sec / 10);
        clock[7] = (char)('0' + sec % 10);
        self->stamp_len = 19;
        self->second = second;
        self->second_valid = 1;
        return 0;
    }
    if (PyErr_Occurred()) return -1;
general:;
    PyObject *stamp = PyObject_CallOneArg(self->record_stamp, now);
    if (stamp == NULL) return -1;
    Py_ssize_t n;
    const char *utf8 = PyUnicode_Check(stamp) ? PyUnicode_AsUTF8AndSize(stamp, &n) : NULL;
    if (utf8 == NULL || n >= (Py_ssize_t)sizeof self->stamp) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "record_stamp gave no stamp");
        Py_DECREF(stamp);
        return -1;
    }
    memcpy(self->stamp, utf8, (size_t)n);
    self->stamp_len = n;
    Py_DECREF(stamp);
    self->second_valid = 0;
    self->day_valid = 0; /* the stamp holds another date now */
    return 0;
}

/* format(value, "") (an f-string's `{value}`): digits for an int. */
static int add_formatted(Buffer *b, PyObject *value) {
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (!overflow) {
            if (v == -1 && PyErr_Occurred()) return -1;
            return buf_ll(b, v);
        }
    }
    PyObject *text = PyObject_Format(value, NULL);
    if (text == NULL) return -1;
    int rc = buf_str(b, text);
    Py_DECREF(text);
    return rc;
}

/* int(value) as a C long long: a time's whole seconds. */
static int whole(PyObject *value, long long *out) {
    if (PyFloat_CheckExact(value)) {
        double d = PyFloat_AS_DOUBLE(value);
        if (isfinite(d) && d > -9.2e18 && d < 9.2e18) {
            *out = (long long)d; /* truncates toward zero, as int() does */
            return 0;
        }
    }
    PyObject *number = PyNumber_Long(value);
    if (number == NULL) return -1;
    *out = PyLong_AsLongLong(number);
    Py_DECREF(number);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* `text` as a record writes it: as it is, or quote_value's quoted form. */
static int add_quoted(JobLog *self, Buffer *b, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "a record value must be str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return -1;
    }
    if (PyUnicode_IS_ASCII(text)) {
        const unsigned char *chars = PyUnicode_1BYTE_DATA(text);
        Py_ssize_t n = PyUnicode_GET_LENGTH(text), i;
        for (i = 0; i < n && !self->quoted[chars[i]]; i++) {
        }
        if (i == n) return buf_add(b, (const char *)chars, n);
    }
    PyObject *quoted = PyObject_CallOneArg(self->quote_value, text);
    if (quoted == NULL) return -1;
    int rc = PyUnicode_Check(quoted) ? buf_str(b, quoted) : -1;
    if (rc < 0 && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "quote_value gave no str");
    Py_DECREF(quoted);
    return rc;
}

static int add_attr_quoted(JobLog *self, Buffer *b, PyObject *job, PyObject *name) {
    PyObject *value = PyObject_GetAttr(job, name);
    if (value == NULL) return -1;
    int rc = add_quoted(self, b, value);
    Py_DECREF(value);
    return rc;
}

static int add_attr_formatted(Buffer *b, PyObject *job, PyObject *name) {
    PyObject *value = PyObject_GetAttr(job, name);
    if (value == NULL) return -1;
    int rc = add_formatted(b, value);
    Py_DECREF(value);
    return rc;
}

/* "HH:MM:SS" of whole non-negative seconds (format_hms of an int). */
static int add_hms(Buffer *b, long long seconds) {
    long long hours = seconds / 3600;
    if ((hours < 10 ? buf_lit(b, "0") : 0) < 0 || buf_ll(b, hours) < 0) return -1;
    if (buf_lit(b, ":") < 0 || buf_2(b, seconds % 3600 / 60) < 0 || buf_lit(b, ":") < 0)
        return -1;
    return buf_2(b, seconds % 60);
}

static PyObject *s_jobid, *s_size, *s_wall_time, *s_submit_time, *s_queue, *s_user_name,
    *s_project, *s_dependencies, *s_location, *s_start_time, *s_exit_status, *s_A,
    *abort_fields;

static int add_stamp_and_id(JobLog *self, const char *kind, PyObject *jobid) {
    Buffer *b = &self->out;
    if (buf_add(b, self->stamp, self->stamp_len) < 0 || buf_add(b, kind, 3) < 0) return -1;
    if (add_formatted(b, jobid) < 0) return -1;
    return buf_lit(b, ";");
}

static int flush_block(JobLog *self) {
    if (self->out.len == 0) return 0;
    PyObject *text = PyBytes_FromStringAndSize(self->out.data, self->out.len);
    if (text == NULL) return -1;
    self->out.len = 0;
    PyObject *r = PyObject_CallOneArg(self->sink, text);
    Py_DECREF(text);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* `text` as a record writes it, as a new str: itself, or quote_value's quoted form. */
static PyObject *quoted_str(JobLog *self, PyObject *text) {
    if (PyUnicode_Check(text) && PyUnicode_IS_ASCII(text)) {
        const unsigned char *chars = PyUnicode_1BYTE_DATA(text);
        Py_ssize_t n = PyUnicode_GET_LENGTH(text), i;
        for (i = 0; i < n && !self->quoted[chars[i]]; i++) {
        }
        if (i == n) {
            Py_INCREF(text);
            return text;
        }
    }
    PyObject *quoted = PyObject_CallOneArg(self->quote_value, text);
    if (quoted != NULL && !PyUnicode_Check(quoted)) {
        Py_DECREF(quoted);
        PyErr_SetString(PyExc_TypeError, "quote_value gave no str");
        return NULL;
    }
    return quoted;
}

static PyObject *joblog_submitted(JobLog *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "submitted(job, now)");
        return NULL;
    }
    PyObject *job = args[0], *now = args[1];
    PyObject *jobid = NULL, *wall_time = NULL, *deps = NULL, *submit = NULL;
    Parts *p = NULL;
    Buffer *h = &self->head, *q = &self->qtime;
    h->len = q->len = self->queue.len = self->user.len = 0;
    if (set_stamp(self, now) < 0) return NULL;
    if ((jobid = PyObject_GetAttr(job, s_jobid)) == NULL) goto fail;
    /* head: "Resource_List.ncpus=0 {ask} args= ctime={qtime} cwd= " where ask is
     * "Resource_List.nodect={size} Resource_List.walltime={wall} account={account}" */
    if (buf_lit(h, "Resource_List.ncpus=0 Resource_List.nodect=") < 0) goto fail;
    if (add_attr_formatted(h, job, s_size) < 0) goto fail;
    if (buf_lit(h, " Resource_List.walltime=") < 0) goto fail;
    if ((wall_time = PyObject_GetAttr(job, s_wall_time)) == NULL) goto fail;
    PyObject *wall = PyDict_GetItemWithError(self->walls, wall_time); /* borrowed */
    if (wall == NULL) {
        if (PyErr_Occurred()) goto fail;
        PyObject *text = PyObject_CallOneArg(self->format_hms, wall_time);
        if (text == NULL) goto fail;
        wall = PyUnicode_Check(text) ? PyUnicode_AsUTF8String(text) : NULL;
        Py_DECREF(text);
        if (wall == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "format_hms gave no str");
            goto fail;
        }
        int rc = PyDict_SetItem(self->walls, wall_time, wall);
        Py_DECREF(wall); /* the dict holds it */
        if (rc < 0) goto fail;
    }
    if (buf_add(h, PyBytes_AS_STRING(wall), PyBytes_GET_SIZE(wall)) < 0) goto fail;
    if (buf_lit(h, " account=") < 0) goto fail;
    if (add_attr_quoted(self, h, job, s_project) < 0) goto fail;
    /* qtime = str(int(submit_time)) */
    long long qtime;
    if ((submit = PyObject_GetAttr(job, s_submit_time)) == NULL) goto fail;
    if (whole(submit, &qtime) < 0) goto fail;
    if (buf_ll(q, qtime) < 0) goto fail;
    if (add_attr_quoted(self, &self->queue, job, s_queue) < 0) goto fail;
    if (add_attr_quoted(self, &self->user, job, s_user_name) < 0) goto fail;

    /* Q: "{stamp};Q;{jobid};{ask} ctime={qtime} {depends}jobname=N/A qtime={qtime}
     *     queue={queue} user={user}\n" -- ask is head past "Resource_List.ncpus=0 " */
    Buffer *b = &self->out;
    const Py_ssize_t ncpus = (Py_ssize_t)sizeof("Resource_List.ncpus=0 ") - 1;
    if (add_stamp_and_id(self, ";Q;", jobid) < 0) goto fail;
    if (buf_add(b, h->data + ncpus, h->len - ncpus) < 0) goto fail;
    if (buf_lit(b, " ctime=") < 0 || buf_add(b, q->data, q->len) < 0) goto fail;
    if (buf_lit(b, " ") < 0) goto fail;
    if ((deps = PyObject_GetAttr(job, s_dependencies)) == NULL) goto fail;
    int any = PyObject_IsTrue(deps);
    if (any < 0) goto fail;
    if (any) {
        PyObject *seq = PySequence_Fast(deps, "dependencies must be a sequence");
        if (seq == NULL) goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        int rc = buf_lit(b, "dependencies=");
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
            PyObject *dep = PySequence_Fast_GET_ITEM(seq, i);
            if (i) rc = buf_lit(b, ":");
            if (rc == 0 && PyLong_CheckExact(dep)) {
                rc = add_formatted(b, dep); /* str(int): its digits */
            } else if (rc == 0) {
                PyObject *text = PyObject_Str(dep);
                rc = text == NULL ? -1 : buf_str(b, text);
                Py_XDECREF(text);
            }
        }
        Py_DECREF(seq);
        if (rc < 0 || buf_lit(b, " ") < 0) goto fail;
    }
    if (buf_lit(b, "jobname=N/A qtime=") < 0 || buf_add(b, q->data, q->len) < 0) goto fail;
    if (buf_lit(b, " queue=") < 0 || buf_add(b, self->queue.data, self->queue.len) < 0)
        goto fail;
    if (buf_lit(b, " user=") < 0 || buf_add(b, self->user.data, self->user.len) < 0) goto fail;
    if (buf_lit(b, "\n") < 0) goto fail;
    /* head goes on: " args= ctime={qtime} cwd= " */
    if (buf_lit(h, " args= ctime=") < 0 || buf_add(h, q->data, q->len) < 0 ||
        buf_lit(h, " cwd= ") < 0)
        goto fail;
    Py_ssize_t size = h->len + q->len + self->queue.len + self->user.len;
    if ((p = PyObject_NewVar(Parts, &PartsType, size)) == NULL) goto fail;
    p->head_len = h->len;
    p->qtime_len = q->len;
    p->queue_len = self->queue.len;
    p->user_len = self->user.len;
    p->exec_host = NULL;
    memcpy(P_HEAD(p), h->data, (size_t)h->len);
    memcpy(P_QTIME(p), q->data, (size_t)q->len);
    memcpy(P_QUEUE(p), self->queue.data, (size_t)self->queue.len);
    memcpy(P_USER(p), self->user.data, (size_t)self->user.len);
    if (PyDict_SetItem(self->parts, jobid, (PyObject *)p) < 0) goto fail;
    Py_DECREF(p);
    Py_DECREF(jobid);
    Py_DECREF(wall_time);
    Py_DECREF(submit);
    Py_DECREF(deps);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(p);
    Py_XDECREF(jobid);
    Py_XDECREF(wall_time);
    Py_XDECREF(submit);
    Py_XDECREF(deps);
    return NULL;
}

static Parts *parts_of(JobLog *self, PyObject *jobid) {
    PyObject *p = PyDict_GetItemWithError(self->parts, jobid);
    if (p == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, jobid);
    return (Parts *)p;
}

/* "etime={qtime} exe= exec_host={location} jobname=N/A mode= qtime={qtime} queue={queue} " */
static int add_middle(Buffer *b, Parts *p) {
    if (p->exec_host == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a job ended that never started");
        return -1;
    }
    if (buf_lit(b, "etime=") < 0 || buf_add(b, P_QTIME(p), p->qtime_len) < 0) return -1;
    if (buf_lit(b, " exe= exec_host=") < 0 || buf_str(b, p->exec_host) < 0) return -1;
    if (buf_lit(b, " jobname=N/A mode= qtime=") < 0) return -1;
    if (buf_add(b, P_QTIME(p), p->qtime_len) < 0) return -1;
    if (buf_lit(b, " queue=") < 0 || buf_add(b, P_QUEUE(p), p->queue_len) < 0) return -1;
    return buf_lit(b, " ");
}

static PyObject *joblog_started(JobLog *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "started(job, now)");
        return NULL;
    }
    PyObject *job = args[0], *now = args[1];
    if (set_stamp(self, now) < 0) return NULL;
    PyObject *jobid = PyObject_GetAttr(job, s_jobid);
    if (jobid == NULL) return NULL;
    Parts *p = parts_of(self, jobid);
    if (p == NULL) goto fail;
    PyObject *location = PyObject_GetAttr(job, s_location);
    if (location == NULL) goto fail;
    PyObject *exec_host = quoted_str(self, location);
    Py_DECREF(location);
    if (exec_host == NULL) goto fail;
    Py_XSETREF(p->exec_host, exec_host);
    /* S: "{stamp};S;{jobid};{head}{middle}start={int(now)} user={user}\n" */
    long long start;
    if (whole(now, &start) < 0) goto fail;
    Buffer *b = &self->out;
    if (add_stamp_and_id(self, ";S;", jobid) < 0) goto fail;
    if (buf_add(b, P_HEAD(p), p->head_len) < 0 || add_middle(b, p) < 0) goto fail;
    if (buf_lit(b, "start=") < 0 || buf_ll(b, start) < 0) goto fail;
    if (buf_lit(b, " user=") < 0 || buf_add(b, P_USER(p), p->user_len) < 0) goto fail;
    if (buf_lit(b, "\n") < 0) goto fail;
    Py_DECREF(jobid);
    Py_RETURN_NONE;
fail:
    Py_DECREF(jobid);
    return NULL;
}

static PyObject *joblog_ended(JobLog *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "ended(job, now, killed)");
        return NULL;
    }
    PyObject *job = args[0], *now = args[1];
    int killed = PyObject_IsTrue(args[2]);
    if (killed < 0) return NULL;
    PyObject *jobid = PyObject_GetAttr(job, s_jobid);
    if (jobid == NULL) return NULL;
    PyObject *start_time = NULL;
    Parts *p = NULL;
    Buffer *b = &self->out;
    if (killed) {
        /* Cobalt writes an A (abort) record when the wall-time limit kills a job. */
        if (PyLong_CheckExact(jobid)) {
            if (set_stamp(self, now) < 0) goto fail;
            if (add_stamp_and_id(self, ";A;", jobid) < 0) goto fail;
            if (buf_lit(b, "reason=time_limit\n") < 0) goto fail;
        } else { /* format_record checks the id */
            PyObject *line = PyObject_CallFunctionObjArgs(self->format_record, now, s_A, jobid,
                                                          abort_fields, NULL);
            if (line == NULL) goto fail;
            int rc = PyUnicode_Check(line) ? buf_str(b, line) : -1;
            if (rc < 0 && !PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "format_record gave no str");
            Py_DECREF(line);
            if (rc < 0 || buf_lit(b, "\n") < 0) goto fail;
        }
    }
    if (set_stamp(self, now) < 0) goto fail;
    p = parts_of(self, jobid);
    if (p == NULL) goto fail;
    Py_INCREF(p);
    if (PyDict_DelItem(self->parts, jobid) < 0) goto fail;
    /* start = int(job.start_time if job.start_time >= 0 else now) */
    if ((start_time = PyObject_GetAttr(job, s_start_time)) == NULL) goto fail;
    int started;
    if (PyFloat_CheckExact(start_time)) {
        started = PyFloat_AS_DOUBLE(start_time) >= 0;
    } else if (PyLong_CheckExact(start_time)) {
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(start_time, &overflow);
        if (value == -1 && PyErr_Occurred()) goto fail;
        started = overflow > 0 || (overflow == 0 && value >= 0);
    } else {
        PyObject *zero = PyLong_FromLong(0);
        if (zero == NULL) goto fail;
        started = PyObject_RichCompareBool(start_time, zero, Py_GE);
        Py_DECREF(zero);
        if (started < 0) goto fail;
    }
    long long start, end;
    if (whole(started ? start_time : now, &start) < 0 || whole(now, &end) < 0) goto fail;
    long long runtime = end > start ? end - start : 0;
    /* E: "{stamp};E;{jobid};Exit_status={exit} {head}end={end} {middle}
     *     resources_used.nodect={size} resources_used.walltime={hms(runtime)}
     *     runtime={runtime} start={start} user={user}\n" */
    if (add_stamp_and_id(self, ";E;", jobid) < 0) goto fail;
    if (buf_lit(b, "Exit_status=") < 0 || add_attr_formatted(b, job, s_exit_status) < 0)
        goto fail;
    if (buf_lit(b, " ") < 0 || buf_add(b, P_HEAD(p), p->head_len) < 0) goto fail;
    if (buf_lit(b, "end=") < 0 || buf_ll(b, end) < 0 || buf_lit(b, " ") < 0) goto fail;
    if (add_middle(b, p) < 0) goto fail;
    if (buf_lit(b, "resources_used.nodect=") < 0 || add_attr_formatted(b, job, s_size) < 0)
        goto fail;
    if (buf_lit(b, " resources_used.walltime=") < 0 || add_hms(b, runtime) < 0) goto fail;
    if (buf_lit(b, " runtime=") < 0 || buf_ll(b, runtime) < 0) goto fail;
    if (buf_lit(b, " start=") < 0 || buf_ll(b, start) < 0) goto fail;
    if (buf_lit(b, " user=") < 0 || buf_add(b, P_USER(p), p->user_len) < 0) goto fail;
    if (buf_lit(b, "\n") < 0) goto fail;
    Py_DECREF(p);
    Py_DECREF(start_time);
    Py_DECREF(jobid);
    if (self->out.len >= BLOCK && flush_block(self) < 0) return NULL;
    Py_RETURN_NONE;
fail:
    Py_XDECREF(p);
    Py_XDECREF(start_time);
    Py_DECREF(jobid);
    return NULL;
}

static PyObject *joblog_append(JobLog *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "append(text): text must be str");
        return NULL;
    }
    if (buf_str(&self->out, text) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *joblog_flush(JobLog *self, PyObject *Py_UNUSED(ignored)) {
    if (flush_block(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static int joblog_init(JobLog *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"sink", "record_stamp", "quote_value", "format_hms",
                            "format_record", "quoted_ascii", NULL};
    PyObject *sink, *stamp, *quote, *hms, *record;
    Py_buffer quoted;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOy*:JobLog", names, &sink, &stamp, &quote,
                                     &hms, &record, &quoted))
        return -1;
    if (quoted.len != 128) {
        PyBuffer_Release(&quoted);
        PyErr_SetString(PyExc_ValueError, "quoted_ascii must hold 128 flags, one per ASCII code");
        return -1;
    }
    memcpy(self->quoted, quoted.buf, 128);
    PyBuffer_Release(&quoted);
    Py_INCREF(sink);
    Py_XSETREF(self->sink, sink);
    Py_INCREF(stamp);
    Py_XSETREF(self->record_stamp, stamp);
    Py_INCREF(quote);
    Py_XSETREF(self->quote_value, quote);
    Py_INCREF(hms);
    Py_XSETREF(self->format_hms, hms);
    Py_INCREF(record);
    Py_XSETREF(self->format_record, record);
    Py_XSETREF(self->parts, PyDict_New());
    Py_XSETREF(self->walls, PyDict_New());
    self->second_valid = self->day_valid = 0;
    self->out.len = 0;
    if (buf_reserve(&self->out, BLOCK + 64 * 1024) < 0) return -1; /* a block and a record */
    return (self->parts == NULL || self->walls == NULL) ? -1 : 0;
}

static int joblog_traverse(JobLog *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->sink);
    Py_VISIT(self->record_stamp);
    Py_VISIT(self->quote_value);
    Py_VISIT(self->format_hms);
    Py_VISIT(self->format_record);
    Py_VISIT(self->parts);
    Py_VISIT(self->walls);
    Py_VISIT(self->dict);
    return 0;
}

static int joblog_clear(JobLog *self) {
    Py_CLEAR(self->sink);
    Py_CLEAR(self->record_stamp);
    Py_CLEAR(self->quote_value);
    Py_CLEAR(self->format_hms);
    Py_CLEAR(self->format_record);
    Py_CLEAR(self->parts);
    Py_CLEAR(self->walls);
    Py_CLEAR(self->dict);
    return 0;
}

static void joblog_dealloc(JobLog *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    joblog_clear(self);
    PyMem_Free(self->out.data);
    PyMem_Free(self->head.data);
    PyMem_Free(self->qtime.data);
    PyMem_Free(self->queue.data);
    PyMem_Free(self->user.data);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyMethodDef joblog_methods[] = {
    {"submitted", (PyCFunction)(void (*)(void))joblog_submitted, METH_FASTCALL,
     "submitted(job, now): the job's Q record."},
    {"started", (PyCFunction)(void (*)(void))joblog_started, METH_FASTCALL,
     "started(job, now): the job's S record."},
    {"ended", (PyCFunction)(void (*)(void))joblog_ended, METH_FASTCALL,
     "ended(job, now, killed): an A record if killed at its limit, then the job's E record."},
    {"append", (PyCFunction)joblog_append, METH_O,
     "append(text): whole records formatted elsewhere, each ending in a newline, in order."},
    {"flush", (PyCFunction)joblog_flush, METH_NOARGS,
     "flush(): hand every record gathered to the sink."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef joblog_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(JobLog, weakrefs), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(JobLog, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot joblog_slots[] = {
    {Py_tp_doc, "Writes the job log's Q, S and E records (joblog.PureAccountingObserver's "
                "bytes)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, joblog_init},
    {Py_tp_dealloc, joblog_dealloc},
    {Py_tp_traverse, joblog_traverse},
    {Py_tp_clear, joblog_clear},
    {Py_tp_methods, joblog_methods},
    {Py_tp_members, joblog_members},
    {0, NULL},
};

static PyType_Spec joblog_spec = {
    .name = "cobaltlite._speedups.JobLog",
    .basicsize = sizeof(JobLog),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = joblog_slots,
};

/* ------------------------------------------------------------------ series_columns */

/* metrics.time_series' arithmetic on C doubles: the same operations in the same order as its
 * Python loop, on the same values (each time and node count is checked to be a float, or an
 * int a double holds exactly, so every comparison, sum and product rounds as Python's does);
 * anything else gives None and time_series runs its Python loop. */

typedef struct {
    const double *first, *second; /* sort keys: by first ascending, then second descending */
} SortKeys;

/* Stable merge sort of `index` (n entries) by keys; `tmp` has room for n. */
static void merge_sort(uint32_t *index, uint32_t *tmp, Py_ssize_t n, const SortKeys *k) {
    if (n < 2) return;
    Py_ssize_t half = n / 2;
    merge_sort(index, tmp, half, k);
    merge_sort(index + half, tmp, n - half, k);
    Py_ssize_t i = 0, j = half, o = 0;
    while (i < half && j < n) {
        double a = k->first[index[i]], b = k->first[index[j]];
        int right_first = b < a;
        if (!right_first && !(a < b) && k->second != NULL)
            right_first = k->second[index[j]] > k->second[index[i]];
        tmp[o++] = right_first ? index[j++] : index[i++];
    }
    while (i < half) tmp[o++] = index[i++];
    while (j < n) tmp[o++] = index[j++];
    memcpy(index, tmp, (size_t)n * sizeof *index);
}

#define EXACT_INT (9007199254740992.0) /* 2**53: every int up to it is a double exactly */

/* A time or a node count as a double, if it is exactly one (1), else 0. */
static int exact_double(PyObject *value, double *out) {
    if (PyFloat_CheckExact(value)) {
        *out = PyFloat_AS_DOUBLE(value);
        return !isnan(*out);
    }
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred()) || v > (1LL << 53) || v < -(1LL << 53)) {
            PyErr_Clear();
            return 0;
        }
        *out = (double)v;
        return 1;
    }
    return 0;
}

#define SPANS 8 /* rolling windows at most */

static PyObject *series_columns(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *outcomes, *spans_arg;
    Py_ssize_t f_submit, f_start, f_end, f_nodes, drop;
    long long machine_nodes;
    double step;
    if (!PyArg_ParseTuple(args, "O(nnnn)LdO!n:series_columns", &outcomes, &f_submit, &f_start,
                          &f_end, &f_nodes, &machine_nodes, &step, &PyTuple_Type, &spans_arg,
                          &drop))
        return NULL;
    Py_ssize_t nspans = PyTuple_GET_SIZE(spans_arg);
    double spans[SPANS];
    if (nspans > SPANS || drop < 1 || machine_nodes <= 0 || machine_nodes > (1LL << 53) || !(step > 0))
        Py_RETURN_NONE;
    for (Py_ssize_t k = 0; k < nspans; k++) {
        if (!exact_double(PyTuple_GET_ITEM(spans_arg, k), &spans[k])) Py_RETURN_NONE;
    }
    PyObject *seq = PySequence_Fast(outcomes, "outcomes must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t need = f_submit > f_start ? f_submit : f_start;
    need = need > f_end ? need : f_end;
    need = need > f_nodes ? need : f_nodes;
    PyObject *result = NULL;
    double *submit = NULL, *start = NULL, *end = NULL, *nodes = NULL, *times = NULL,
           *values = NULL, *areas = NULL, *columns = NULL;
    double *submit_times = NULL, *start_times = NULL, *started_submits = NULL,
           *start_nodes = NULL, *end_times = NULL, *end_nodes = NULL;
    uint32_t *by_submit = NULL, *by_start = NULL, *by_end = NULL, *tmp = NULL;
    if (n == 0 || n >= (Py_ssize_t)UINT32_MAX) goto none;
    submit = PyMem_Malloc((size_t)(n + 1) * sizeof(double));
    start = PyMem_Malloc((size_t)(n + 1) * sizeof(double));
    end = PyMem_Malloc((size_t)(n + 1) * sizeof(double));
    nodes = PyMem_Malloc((size_t)n * sizeof(double));
    by_submit = PyMem_Malloc((size_t)n * sizeof(uint32_t));
    by_start = PyMem_Malloc((size_t)n * sizeof(uint32_t));
    by_end = PyMem_Malloc((size_t)n * sizeof(uint32_t));
    tmp = PyMem_Malloc((size_t)n * sizeof(uint32_t));
    if (!submit || !start || !end || !nodes || !by_submit || !by_start || !by_end || !tmp) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) <= need) goto none;
        if (!exact_double(PyTuple_GET_ITEM(o, f_submit), &submit[i]) ||
            !exact_double(PyTuple_GET_ITEM(o, f_start), &start[i]) ||
            !exact_double(PyTuple_GET_ITEM(o, f_end), &end[i]) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(o, f_nodes)) ||
            !exact_double(PyTuple_GET_ITEM(o, f_nodes), &nodes[i]))
            goto none;
        by_submit[i] = by_start[i] = by_end[i] = (uint32_t)i;
    }
    /* the orders of time_series' sorts: by submission; by start, equal starts by later
     * submission first; by end (each stable, as sorted() is) */
    SortKeys k_submit = {submit, NULL}, k_start = {start, submit}, k_end = {end, NULL};
    merge_sort(by_submit, tmp, n, &k_submit);
    merge_sort(by_start, tmp, n, &k_start);
    merge_sort(by_end, tmp, n, &k_end);
    PyMem_Free(tmp);
    tmp = NULL;
    /* columns in those orders, each time column ended by an infinite time */
    submit_times = PyMem_Malloc((size_t)(n + 1) * sizeof(double));
    start_times = PyMem_Malloc((size_t)(n + 1) * sizeof(double));
    started_submits = PyMem_Malloc((size_t)n * sizeof(double));
    start_nodes = PyMem_Malloc((size_t)n * sizeof(double));
    end_times = PyMem_Malloc((size_t)(n + 1) * sizeof(double));
    end_nodes = PyMem_Malloc((size_t)n * sizeof(double));
    if (!submit_times || !start_times || !started_submits || !start_nodes || !end_times ||
        !end_nodes) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        submit_times[i] = submit[by_submit[i]];
        start_times[i] = start[by_start[i]];
        started_submits[i] = submit[by_start[i]];
        start_nodes[i] = nodes[by_start[i]];
        end_times[i] = end[by_end[i]];
        end_nodes[i] = nodes[by_end[i]];
    }
    submit_times[n] = start_times[n] = end_times[n] = INFINITY;
    /* the unsorted columns and the orders are not read again: freed before the loop's arrays */
    PyMem_Free(submit);
    PyMem_Free(start);
    PyMem_Free(end);
    PyMem_Free(nodes);
    PyMem_Free(by_submit);
    PyMem_Free(by_start);
    PyMem_Free(by_end);
    submit = start = end = nodes = NULL;
    by_submit = by_start = by_end = NULL;

    double first = submit_times[0], last = end_times[n - 1], first_start = start_times[0];
    Py_ssize_t samples = 0;
    for (double t = first; t <= last; t += step) samples++;
    Py_ssize_t ncols = 3 + nspans;
    columns = PyMem_Malloc((size_t)(samples ? samples : 1) * (size_t)ncols * sizeof(double));
    Py_ssize_t cap = 2 * n + 1;
    times = PyMem_Malloc((size_t)cap * sizeof(double));
    values = PyMem_Malloc((size_t)cap * sizeof(double));
    areas = PyMem_Malloc((size_t)cap * sizeof(double));
    if (!columns || !times || !values || !areas) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t opens[SPANS] = {0}, steps = 0, sample = 0;
    Py_ssize_t i_up = 0, i_down = 0, i_submit = 0, i_start = 0;
    long long held = 0, count = 0;
    double when = first_start, value = 0.0, area = 0.0, submits = 0.0;
    for (double t = first; t <= last; t += step, sample++) {
        double *row = columns + sample * ncols;
        for (;;) {
            double started = start_times[i_start], submitted = submit_times[i_submit];
            if (started <= submitted) {
                if (started > t) break;
                count -= 1;
                submits -= started_submits[i_start];
                i_start++;
            } else if (submitted <= t) {
                count += 1;
                submits += submitted;
                i_submit++;
            } else {
                break;
            }
        }
        for (;;) {
            double up = start_times[i_up], down = end_times[i_down];
            double now = up < down ? up : down;
            if (now > t) break;
            while (start_times[i_up] == now) held += (long long)start_nodes[i_up++];
            while (end_times[i_down] == now) held -= (long long)end_nodes[i_down++];
            area += value * (now - when);
            when = now;
            value = (double)held / (double)machine_nodes;
            times[steps] = now;
            values[steps] = value;
            areas[steps] = area;
            steps++;
        }
        row[0] = (t - first) / 3600.0;
        double depth = (double)count * t - submits;
        row[1] = (depth > 0.0 ? depth : 0.0) / 60.0;
        if (t < first_start) {
            for (Py_ssize_t c = 2; c < ncols; c++) row[c] = 0.0;
            continue;
        }
        double area_now = area + value * (t - when);
        row[2] = value;
        Py_ssize_t gone = steps;
        for (Py_ssize_t k = 0; k < nspans; k++) {
            double opened = t - spans[k], average;
            if (opened < first_start) opened = first_start;
            if (t <= opened) {
                average = value;
            } else {
                /* bisect_right(times, opened, opens[k]) - 1 */
                Py_ssize_t lo = opens[k], hi = steps;
                while (lo < hi) {
                    Py_ssize_t mid = lo + (hi - lo) / 2;
                    if (opened < times[mid]) hi = mid;
                    else lo = mid + 1;
                }
                Py_ssize_t i = opens[k] = lo - 1;
                average = (area_now - (areas[i] + values[i] * (opened - times[i]))) /
                          (t - opened);
            }
            row[3 + k] = average;
            if (opens[k] < gone) gone = opens[k];
        }
        if (gone >= drop) { /* steps no window reads again, dropped at once */
            memmove(times, times + gone, (size_t)(steps - gone) * sizeof(double));
            memmove(values, values + gone, (size_t)(steps - gone) * sizeof(double));
            memmove(areas, areas + gone, (size_t)(steps - gone) * sizeof(double));
            steps -= gone;
            for (Py_ssize_t k = 0; k < nspans; k++) opens[k] -= gone;
        }
    }
    /* the columns, as lists of floats (unrounded: time_series rounds them) */
    result = PyTuple_New(ncols);
    if (result == NULL) goto done;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *list = PyList_New(samples);
        if (list == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, c, list);
        for (Py_ssize_t s = 0; s < samples; s++) {
            PyObject *f = PyFloat_FromDouble(columns[s * ncols + c]);
            if (f == NULL) {
                Py_CLEAR(result);
                goto done;
            }
            PyList_SET_ITEM(list, s, f);
        }
    }
    goto done;
none:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_DECREF(seq);
    PyMem_Free(submit);
    PyMem_Free(start);
    PyMem_Free(end);
    PyMem_Free(nodes);
    PyMem_Free(by_submit);
    PyMem_Free(by_start);
    PyMem_Free(by_end);
    PyMem_Free(tmp);
    PyMem_Free(times);
    PyMem_Free(values);
    PyMem_Free(areas);
    PyMem_Free(columns);
    PyMem_Free(submit_times);
    PyMem_Free(start_times);
    PyMem_Free(started_submits);
    PyMem_Free(start_nodes);
    PyMem_Free(end_times);
    PyMem_Free(end_nodes);
    return result;
}

/* ------------------------------------------------------------------ easy_candidates */

/* The comprehension of Scheduler._easy_on_flat (cobaltlite/scheduler/scheduler.py, its twin):
 *     [job for job in waiting if job.size <= idle
 *      and (now + job.wall_time <= shadow or job.size <= extra)]
 * with Python's arithmetic on the values it meets: ints that fit a long long and floats. A
 * float plus an int adds the int as a double (rounded as Python's int-to-float conversion,
 * which raises only past a long long's range); an int against a float compares exactly, as
 * Python does (an int past 2**53 is not rounded first). Anything else (a subclass of int, an
 * int past a long long, a sum of ints that overflows one, another type) gives None and the
 * caller runs the comprehension. Jobs are read as the attribute protocol reads them (their
 * slots found through their type, below): they are SimJob in Qsim, other classes in the
 * daemons. */

typedef struct {
    int is_float;
    long long i;
    double f;
} Number;

/* `value` as a Number (1), or 0 where it is not an exact int fitting a long long or a float. */
static int as_number(PyObject *value, Number *out) {
    if (PyFloat_CheckExact(value)) {
        out->is_float = 1;
        out->f = PyFloat_AS_DOUBLE(value);
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        int overflow;
        out->is_float = 0;
        out->i = PyLong_AsLongLongAndOverflow(value, &overflow);
        return !overflow; /* (an exact int never fails otherwise) */
    }
    return 0;
}

#define TWO_63 (9223372036854775808.0)

/* i <= d exactly, as Python compares an int with a float. */
static int int_le_float(long long i, double d) {
    if (isnan(d)) return 0;
    if (d >= TWO_63) return 1;
    if (d < -TWO_63) return 0;
    return i <= (long long)floor(d); /* (an integer is at most d exactly when at most its floor) */
}

/* d <= i exactly. */
static int float_le_int(double d, long long i) {
    if (isnan(d)) return 0;
    double up = ceil(d);
    if (up >= TWO_63) return 0;
    if (up < -TWO_63) return 1;
    return (long long)up <= i;
}

/* a + b <= shadow as Python computes it (1 or 0), or -2 where only Python can say (an int sum
 * past a long long). */
static int ends_by(const Number *a, const Number *b, const Number *shadow) {
    if (!a->is_float && !b->is_float) {
        long long sum;
        if (__builtin_add_overflow(a->i, b->i, &sum)) return -2;
        return shadow->is_float ? int_le_float(sum, shadow->f) : sum <= shadow->i;
    }
    double sum = (a->is_float ? a->f : (double)a->i) + (b->is_float ? b->f : (double)b->i);
    return shadow->is_float ? sum <= shadow->f : float_le_int(sum, shadow->i);
}

/* Where a job type's generic attribute lookup finds `name`: a slot (a member descriptor of an
 * object, as __slots__ and dataclass(slots=True) make, which wins over an instance dict) at the
 * offset returned, or -1 for anything else. Reading the slot directly is what the descriptor
 * does; PyObject_GetAttr's lookup was most of the filter's time (23 ns of 29 per job). */
static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    if (type->tp_getattro != PyObject_GenericGetAttr) return -1;
    PyObject *found = _PyType_Lookup(type, name); /* (borrowed; sets no error) */
    if (found == NULL || Py_TYPE(found) != &PyMemberDescr_Type) return -1;
    PyMemberDef *member = ((PyMemberDescrObject *)found)->d_member;
    return member->type == T_OBJECT_EX && member->flags == 0 ? member->offset : -1;
}

/* job.name, a new reference: from the slot at `at` when there is one and it is set, else by
 * the attribute protocol, which may run Python code (then *ran is set: any type may have
 * changed). */
static PyObject *job_attr(PyObject *job, Py_ssize_t at, PyObject *name, int *ran) {
    if (at >= 0) {
        PyObject *value = *(PyObject **)((char *)job + at);
        if (value != NULL) return Py_NewRef(value);
    }
    *ran = 1;
    return PyObject_GetAttr(job, name);
}

static PyObject *easy_candidates(PyObject *Py_UNUSED(module), PyObject *const *args,
                                 Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "easy_candidates expected 5 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *waiting = args[0];
    Number idle, extra, now, shadow;
    if (!PyList_CheckExact(waiting) || !as_number(args[1], &idle) || idle.is_float
        || !as_number(args[2], &extra) || extra.is_float || !as_number(args[3], &now)
        || !as_number(args[4], &shadow))
        Py_RETURN_NONE;
    PyObject *result = PyList_New(0);
    if (result == NULL) return NULL;
    /* By index, the length read each time, as the comprehension's list iterator does: an
     * attribute read may run Python code. */
    PyTypeObject *known = NULL; /* the type whose slots are found, until Python code runs */
    Py_ssize_t size_at = -1, wall_time_at = -1;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(waiting); k++) {
        PyObject *job = PyList_GET_ITEM(waiting, k);
        Py_INCREF(job);
        if (Py_TYPE(job) != known) {
            known = Py_TYPE(job);
            size_at = slot_offset(known, s_size);
            wall_time_at = slot_offset(known, s_wall_time);
        }
        int ran = 0;
        Number size, wall_time;
        int fits = 0; /* 1: a candidate; 0: not; -1: an error; -2: only Python can say */
        PyObject *value = job_attr(job, size_at, s_size, &ran);
        if (value == NULL) {
            fits = -1;
        } else {
            fits = as_number(value, &size) && !size.is_float ? size.i <= idle.i : -2;
            Py_DECREF(value);
        }
        if (fits == 1) { /* as in Python, wall_time is read only when the size fits */
            value = job_attr(job, wall_time_at, s_wall_time, &ran);
            if (value == NULL) {
                fits = -1;
            } else {
                fits = as_number(value, &wall_time) ? ends_by(&now, &wall_time, &shadow) : -2;
                Py_DECREF(value);
                if (fits == 0) fits = size.i <= extra.i;
            }
        }
        if (fits == 1 && PyList_Append(result, job) < 0) fits = -1;
        Py_DECREF(job);
        if (ran) known = NULL;
        if (fits < 0) {
            Py_DECREF(result);
            if (fits == -1) return NULL;
            Py_RETURN_NONE;
        }
    }
    return result;
}

static PyMethodDef module_methods[] = {
    {"easy_candidates", (PyCFunction)(void (*)(void))easy_candidates, METH_FASTCALL,
     "easy_candidates(waiting, idle, extra, now, shadow): the waiting jobs that may start now in "
     "a flat EASY pass, in order, or None where only the Python comprehension is exact."},
    {"series_columns", series_columns, METH_VARARGS,
     "series_columns(outcomes, (submit, start, end, allocated) field indices, machine_nodes, "
     "step, spans, drop): time_series' columns unrounded (hours, queue depth, utilization, one per "
     "span), or None where only its Python loop is exact."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------ module */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cobaltlite._speedups",
    "Compiled parts of Qsim's output, each with a pure-Python twin.", -1, module_methods,
};

#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__speedups(void) {
    INTERN(s_jobid, "jobid");
    INTERN(s_size, "size");
    INTERN(s_wall_time, "wall_time");
    INTERN(s_submit_time, "submit_time");
    INTERN(s_queue, "queue");
    INTERN(s_user_name, "user_name");
    INTERN(s_project, "project");
    INTERN(s_dependencies, "dependencies");
    INTERN(s_location, "location");
    INTERN(s_start_time, "start_time");
    INTERN(s_exit_status, "exit_status");
    INTERN(s_A, "A");
    if ((abort_fields = Py_BuildValue("{s:s}", "reason", "time_limit")) == NULL) return NULL;
    if (PyType_Ready(&PartsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    /* cobaltlite/compiled.py's ABI: raised with every change of these functions' interface */
    if (PyModule_AddIntConstant(m, "ABI", 2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *type = PyType_FromSpec(&joblog_spec);
    if (type == NULL || PyModule_AddObject(m, "JobLog", type) < 0) {
        Py_XDECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
