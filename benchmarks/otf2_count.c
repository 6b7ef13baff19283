/* The reference for perflow's OTF2 benchmarks: the OTF2 C library reading every event of an
 * archive, one thread, counting records and doing nothing else.
 *
 * Built by benchmarks/_cref.py (cc -O2, no OTF2 headers needed): the library is opened with
 * dlopen from the path given on the command line (the `otf2` wheel's bundled library, the one
 * perflow drives, or otf2-tools' libopen-trace-format2), the few functions used are looked up
 * with dlsym. Every event record type gets the same counting callback (the callee ignores the
 * record's fields, which is ABI-safe on x86-64 and aarch64), so the library decodes every record
 * exactly as it does for perflow's decoder. Local definitions (mapping tables, clock offsets) are
 * read as perflow reads them.
 *
 *   otf2_count LIBRARY ANCHOR            prints: events=N locations=L cpu_user=S cpu_sys=S
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef int (*fn_t)();
static void *lib;

static void *sym(const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "otf2_count: %s not found in the library\n", name);
        exit(2);
    }
    return f;
}

static uint64_t events;
static uint64_t *refs;
static size_t nrefs, caprefs;

static int count(void) {
    events++;
    return 0; /* OTF2_CALLBACK_SUCCESS */
}

static int on_location(void *ud, uint64_t self, uint32_t name, uint8_t type, uint64_t n, uint32_t group) {
    (void)ud; (void)name; (void)type; (void)n; (void)group;
    if (nrefs == caprefs) {
        caprefs = caprefs ? 2 * caprefs : 64;
        refs = realloc(refs, caprefs * sizeof *refs);
    }
    refs[nrefs++] = self;
    return 0;
}

/* every OTF2 3.x event record type (OTF2_EvtReaderCallbacks_Set<Name>Callback) */
static const char *EVENTS[] = {
    "BufferFlush", "MeasurementOnOff", "Enter", "Leave", "MpiSend", "MpiIsend", "MpiIsendComplete",
    "MpiIrecvRequest", "MpiRecv", "MpiIrecv", "MpiRequestTest", "MpiRequestCancelled",
    "MpiCollectiveBegin", "MpiCollectiveEnd", "OmpFork", "OmpJoin", "OmpAcquireLock", "OmpReleaseLock",
    "OmpTaskCreate", "OmpTaskSwitch", "OmpTaskComplete", "Metric", "ParameterString", "ParameterInt",
    "ParameterUnsignedInt", "RmaWinCreate", "RmaWinDestroy", "RmaCollectiveBegin", "RmaCollectiveEnd",
    "RmaGroupSync", "RmaRequestLock", "RmaAcquireLock", "RmaTryLock", "RmaReleaseLock", "RmaSync",
    "RmaWaitChange", "RmaPut", "RmaGet", "RmaAtomic", "RmaOpCompleteBlocking", "RmaOpCompleteNonBlocking",
    "RmaOpTest", "RmaOpCompleteRemote", "ThreadFork", "ThreadJoin", "ThreadTeamBegin", "ThreadTeamEnd",
    "ThreadAcquireLock", "ThreadReleaseLock", "ThreadTaskCreate", "ThreadTaskSwitch", "ThreadTaskComplete",
    "ThreadCreate", "ThreadBegin", "ThreadWait", "ThreadEnd", "CallingContextEnter", "CallingContextLeave",
    "CallingContextSample", "IoCreateHandle", "IoDestroyHandle", "IoDuplicateHandle", "IoSeek",
    "IoChangeStatusFlags", "IoDeleteFile", "IoOperationBegin", "IoOperationTest", "IoOperationIssued",
    "IoOperationComplete", "IoOperationCancelled", "IoAcquireLock", "IoReleaseLock", "IoTryLock",
    "ProgramBegin", "ProgramEnd", "NonBlockingCollectiveRequest", "NonBlockingCollectiveComplete",
    "CommCreate", "CommDestroy", "MpiProbe", "MpiMrecv", "MpiImrecvRequest", "MpiImrecv", NULL};

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: otf2_count LIBRARY ANCHOR\n");
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "otf2_count: %s\n", dlerror());
        return 2;
    }
    void *(*open)(const char *) = sym("OTF2_Reader_Open");
    void *reader = open(argv[2]);
    if (!reader) {
        fprintf(stderr, "otf2_count: cannot open %s\n", argv[2]);
        return 1;
    }
    ((fn_t)sym("OTF2_Reader_SetSerialCollectiveCallbacks"))(reader);

    void *(*gdr_get)(void *) = sym("OTF2_Reader_GetGlobalDefReader");
    void *(*gcbs_new)(void) = sym("OTF2_GlobalDefReaderCallbacks_New");
    void *gdr = gdr_get(reader);
    void *gcbs = gcbs_new();
    ((fn_t)sym("OTF2_GlobalDefReaderCallbacks_SetLocationCallback"))(gcbs, on_location);
    ((fn_t)sym("OTF2_Reader_RegisterGlobalDefCallbacks"))(reader, gdr, gcbs, NULL);
    uint64_t ndefs = 0;
    ((fn_t)sym("OTF2_Reader_ReadAllGlobalDefinitions"))(reader, gdr, &ndefs);
    ((fn_t)sym("OTF2_GlobalDefReaderCallbacks_Delete"))(gcbs);
    ((fn_t)sym("OTF2_Reader_CloseGlobalDefReader"))(reader, gdr);

    int (*select)(void *, uint64_t) = sym("OTF2_Reader_SelectLocation");
    for (size_t i = 0; i < nrefs; i++) select(reader, refs[i]);
    int defs_open = ((fn_t)sym("OTF2_Reader_OpenDefFiles"))(reader) == 0;
    if (((fn_t)sym("OTF2_Reader_OpenEvtFiles"))(reader) != 0) {
        fprintf(stderr, "otf2_count: cannot open the event files\n");
        return 1;
    }
    void *(*cbs_new)(void) = sym("OTF2_EvtReaderCallbacks_New");
    void *cbs = cbs_new();
    char name[128];
    for (const char **e = EVENTS; *e; e++) {
        snprintf(name, sizeof name, "OTF2_EvtReaderCallbacks_Set%sCallback", *e);
        int (*set)(void *, void *) = dlsym(lib, name);
        if (set) set(cbs, (void *)count);
    }
    void *(*get_def)(void *, uint64_t) = sym("OTF2_Reader_GetDefReader");
    void *(*get_evt)(void *, uint64_t) = sym("OTF2_Reader_GetEvtReader");
    int (*read_defs)(void *, void *, uint64_t *) = sym("OTF2_Reader_ReadAllLocalDefinitions");
    int (*close_def)(void *, void *) = sym("OTF2_Reader_CloseDefReader");
    int (*reg)(void *, void *, void *, void *) = sym("OTF2_Reader_RegisterEvtCallbacks");
    int (*read_evt)(void *, void *, uint64_t, uint64_t *) = sym("OTF2_Reader_ReadLocalEvents");
    int (*close_evt)(void *, void *) = sym("OTF2_Reader_CloseEvtReader");
    for (size_t i = 0; i < nrefs; i++) {
        if (defs_open) {
            void *dr = get_def(reader, refs[i]);
            if (dr) {
                uint64_t n;
                read_defs(reader, dr, &n);
                close_def(reader, dr);
            }
        }
        void *er = get_evt(reader, refs[i]);
        if (!er) continue;
        reg(reader, er, cbs, NULL);
        uint64_t got = 0;
        read_evt(reader, er, UINT64_MAX, &got);
        close_evt(reader, er);
    }
    ((fn_t)sym("OTF2_EvtReaderCallbacks_Delete"))(cbs);
    if (defs_open) ((fn_t)sym("OTF2_Reader_CloseDefFiles"))(reader);
    ((fn_t)sym("OTF2_Reader_CloseEvtFiles"))(reader);
    ((fn_t)sym("OTF2_Reader_Close"))(reader);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("events=%llu locations=%zu cpu_user=%.6f cpu_sys=%.6f maxrss_kb=%ld\n", (unsigned long long)events, nrefs,
           ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6,
           ru.ru_maxrss);
    return 0;
}
