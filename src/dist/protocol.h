// The pipeline-parallel wire protocol (spec PRODUCT.md §7.2, docs/DISTRIBUTED.md): frames as
// bytes and back. No sockets and no model here -- only encode/decode, so the codec can be fuzzed
// and reused by the coordinator and the workers.
//
// A frame is a 12-byte header of three big-endian u32 (magic "DS4D", type, payload bytes) and
// then the payload: a fixed record of big-endian u32 fields (64-bit values as hi, lo halves), in
// the order the spec lists them, followed by the variable data the record declares. Tokens are
// i32 sent as big-endian u32. Hidden states and result payloads are carried as raw bytes plus
// their bit width (32, 16 or 8); converting them is the caller's job.
//
// Every decoder checks each declared length against the bytes actually there, in 64-bit
// arithmetic, and the sum of them against the payload size exactly (no trailing bytes), and
// throws ProtocolError naming the frame and the field. FrameReader checks the magic, the type
// and the declared payload size against its maximum before it buffers a single payload byte.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/error.h"

namespace ds4::dist {

class ProtocolError : public Error {
public:
    using Error::Error;
};

inline constexpr uint32_t kMagic = 0x44533444;  // "DS4D"
inline constexpr size_t kHeaderBytes = 12;
// The default bound on one payload: a 4096-token prefill chunk of a PRO-sized hidden state at
// 32 bits (4096 x 4 x 7168 x 4 bytes = 448 MiB) fits with room to spare.
inline constexpr uint32_t kDefaultMaxPayload = 1024u * 1024u * 1024u;
inline constexpr uint32_t kSnapshotChunkBytes = 8u * 1024u * 1024u;  // the largest CHUNK data
inline constexpr uint32_t kMaxModelNameBytes = 127;
inline constexpr uint32_t kMaxHostBytes = 255;

enum class FrameType : uint32_t {
    hello = 1,
    error = 2,
    work = 3,
    result = 4,
    snapshot_save_req = 5,
    snapshot_begin = 6,
    snapshot_chunk = 7,
    snapshot_done = 8,
    snapshot_load_begin = 9,
    // Ours, numbered apart from upstream's 1..9 (10..63 stay unknown): the answer to an
    // IDENTIFY probe (below), which only a coordinator of ours sends.
    identity = 64,
};
const char* frame_type_name(FrameType t);

// Sizes of the fixed records (u32 fields x 4).
inline constexpr size_t kHelloFixedBytes = 10 * 4;
inline constexpr size_t kWorkFixedBytes = 20 * 4;
inline constexpr size_t kRouteFixedBytes = 5 * 4;
inline constexpr size_t kRouteReturnFixedBytes = 3 * 4;
inline constexpr size_t kResultFixedBytes = 10 * 4;
inline constexpr size_t kTelemetryBytes = 10 * 4;
inline constexpr size_t kSnapshotSaveReqBytes = 10 * 4;
inline constexpr size_t kSnapshotBeginFixedBytes = 15 * 4;
inline constexpr size_t kSnapshotChunkFixedBytes = 3 * 4;
inline constexpr size_t kSnapshotDoneFixedBytes = 4 * 4;
inline constexpr size_t kDraftRequestFixedBytes = 4 * 4;
inline constexpr size_t kDraftRowsFixedBytes = 6 * 4;
inline constexpr size_t kBatchFixedBytes = 2 * 4;
inline constexpr size_t kBatchItemBytes = 9 * 4;
// The batch record's version (its first field): a reader refuses any other.
inline constexpr uint32_t kBatchVersion = 1;
// The most sessions one batched WORK may carry: a worker keeps at most 8 sessions
// (pipeline::kMaxWorkerSessions), and a batch's sessions must all be live at once.
inline constexpr uint32_t kMaxBatchItems = 8;
// The draft records' version (their first field): a reader refuses any other.
inline constexpr uint32_t kDraftVersion = 1;
// The most layers one draft request may capture (DSpark reads at most 8).
inline constexpr uint32_t kMaxDraftCaptures = 64;

// WORK flags.
inline constexpr uint32_t kWorkInputHc = 0x1;       // a hidden state is attached
inline constexpr uint32_t kWorkOutputLogits = 0x2;  // this stage must produce logits
inline constexpr uint32_t kWorkResetSession = 0x4;  // drop the session's KV and hash first
inline constexpr uint32_t kWorkAckOnly = 0x8;       // answer with an ACK, no payload
// Ours (not upstream's): with OUTPUT_LOGITS, the logits of every row of the span instead of the
// last row only ([n_tokens][n_vocab]; --dump-logits-f32 over a pipeline needs them).
inline constexpr uint32_t kWorkAllLogits = 0x10;
// Ours (issue 31, speculative decoding over a pipeline): a DraftRequest record follows the route
// blob, and the answer carries a DraftRows section (the draft seam's outputs, model.h BatchItem).
inline constexpr uint32_t kWorkDraftRows = 0x40;
// Ours (issue 38, the extension negotiation): a probe the coordinator sends on a new worker's
// control connection right after its HELLO. Our worker answers with an IDENTITY frame; upstream's
// refuses the flag with an error RESULT, which marks the worker as upstream's (docs/DISTRIBUTED.md,
// "Mixed clusters").
inline constexpr uint32_t kWorkIdentify = 0x80;
// Ours (issue 33, batched calls over a pipeline): the WORK carries the rows of several sessions
// (a WorkBatch record follows the route blob); sent only to a route whose every hop offered
// kFeatureBatchedWork in its IDENTITY (docs/DISTRIBUTED.md, "Batched calls").
inline constexpr uint32_t kWorkBatch = 0x100;
inline constexpr uint32_t kWorkKnownFlags = 0x1DF;
// The only WORK flags upstream ds4 accepts (0x1-0x8): what a route with an upstream hop may send.
inline constexpr uint32_t kWorkUpstreamFlags = 0x0F;
// Route entry flags.
inline constexpr uint32_t kRouteOutputLogits = 0x1;
// Route-return record kinds.
inline constexpr uint32_t kRouteReturnUpstream = 1;

// HELLO (1), worker -> coordinator on the control connection. model_name_len is
// model_name.size() on the wire (<= 127 bytes, no NUL).
struct Hello {
    uint32_t model_id = 0;
    uint32_t quant_bits = 0;
    uint32_t layer_start = 0;
    uint32_t layer_end = 0;
    bool has_output = false;  // u32 0/1 on the wire
    bool has_hidden = false;  // u32 0/1 on the wire
    uint32_t ctx_size = 0;
    uint32_t n_layers = 0;
    uint32_t listen_port = 0;  // the worker's data port, <= 65535
    std::string model_name;
    bool operator==(const Hello&) const = default;
};

// ERROR (2): UTF-8 message bytes, carried as they are.
struct ErrorFrame {
    std::string message;
    bool operator==(const ErrorFrame&) const = default;
};

// One hop of a route: {host_len, port, layer_start, layer_end, flags} plus the host bytes.
struct RouteEntry {
    std::string host;  // 1..255 bytes, no NUL
    uint32_t port = 0;  // 1..65535
    uint32_t layer_start = 0;
    uint32_t layer_end = 0;
    uint32_t flags = 0;  // kRouteOutputLogits only
    bool operator==(const RouteEntry&) const = default;
};

// The route-return record {kind, host_len, port} plus the host; the coordinator appends
// {kRouteReturnUpstream, "", 0} after the entries.
struct RouteReturn {
    uint32_t kind = kRouteReturnUpstream;
    std::string host;  // <= 255 bytes, no NUL
    uint32_t port = 0;  // <= 65535
    bool operator==(const RouteReturn&) const = default;
};

// What the coordinator's drafter reads of a WORK's rows (WORK flag kWorkDraftRows; ours):
// {version, hidden_from, hidden (0/1), capture_count*} then capture_count u32 layer ids. The
// rows are hidden_from .. n_tokens-1 of the span; the last hop returns their final hidden state
// when `hidden`, and every hop the outputs of the listed layers it holds. Checked on decode:
// version = kDraftVersion, hidden_from < n_tokens, hidden 0/1, at most kMaxDraftCaptures layers,
// strictly ascending, and the record is exactly the rest of the payload.
struct DraftRequest {
    uint32_t hidden_from = 0;
    bool hidden = false;
    std::vector<uint32_t> capture;
    bool operator==(const DraftRequest&) const = default;
};

// One session's share of a batched WORK (flag kWorkBatch; ours): {session hi/lo, prefix_hash
// hi/lo, result_hash hi/lo, pos0, n_tokens, flags}. Its rows are the next n_tokens of the WORK's
// tokens and hidden state (the items in order); flags are kWorkOutputLogits (its last row's
// logits) and kWorkAllLogits (every row's) only.
struct WorkItem {
    uint64_t session_id = 0;
    uint64_t prefix_hash = 0;
    uint64_t result_hash = 0;
    uint32_t pos0 = 0;
    uint32_t n_tokens = 0;
    uint32_t flags = 0;
    bool operator==(const WorkItem&) const = default;
};
inline constexpr uint32_t kWorkItemFlags = 0x12;  // kWorkOutputLogits | kWorkAllLogits

// WORK (3). On the wire n_tokens = tokens.size(), token_bytes = 4 * n_tokens, input_hc_bytes =
// input_hc.size(), route_count = route.size(), and route_bytes the size of the route blob: the
// entries, then the return record if there is one.
//
// Checked on decode: n_tokens >= 1 and pos0 + n_tokens fits in u32; no unknown flag;
// INPUT_HC is set exactly when input_hc is non-empty, and then input_hc_bits is 32, 16 or 8 and
// input_hc_bytes is a whole number of values per token (a multiple of n_tokens * bits / 8; the
// width itself depends on the model and is the receiver's check); without a hidden state
// input_hc_bits is 0, 32, 16 or 8; route_index < route_count (or both 0); every route record
// is complete and the blob has nothing after the optional return record.
struct Work {
    uint32_t model_id = 0;
    uint64_t session_id = 0;
    uint64_t request_id = 0;
    uint64_t prefix_hash = 0;  // token_hash over tokens[0, pos0)
    uint64_t result_hash = 0;  // token_hash over tokens[0, pos0 + n_tokens)
    uint32_t pos0 = 0;
    uint32_t layer_start = 0;
    uint32_t layer_end = 0;
    uint32_t flags = 0;
    uint32_t input_hc_bits = 0;
    uint32_t route_index = 0;
    std::vector<int32_t> tokens;
    std::vector<uint8_t> input_hc;
    std::vector<RouteEntry> route;
    std::optional<RouteReturn> route_return;
    // Present exactly when flags has kWorkDraftRows (the encoder refuses a disagreement).
    std::optional<DraftRequest> draft;
    // Non-empty exactly when flags has kWorkBatch: the batch record {version, item_count*} and
    // the items, after the route blob. Checked on decode (before anything is allocated: the
    // count against the bytes there): version = kBatchVersion; 2..kMaxBatchItems items, exactly
    // the rest of the payload; every item has n_tokens >= 1, pos0 + n_tokens within u32, only
    // kWorkItemFlags (ALL_LOGITS with OUTPUT_LOGITS), its own session id; the items' n_tokens
    // sum to the WORK's; item 0 repeats the fixed record's session, hashes and pos0. The WORK's
    // own flags then carry neither RESET_SESSION, ALL_LOGITS nor DRAFT_ROWS, and OUTPUT_LOGITS
    // exactly when some item has it.
    std::vector<WorkItem> batch;
    bool operator==(const Work&) const = default;
};

// One hop's timings in a RESULT: ten u32 fields.
struct Telemetry {
    uint32_t layer_start = 0;
    uint32_t layer_end = 0;
    uint32_t route_index = 0;
    uint32_t pos0 = 0;
    uint32_t n_tokens = 0;
    uint32_t eval_usec = 0;
    uint32_t downstream_wait_usec = 0;
    uint32_t forward_send_usec = 0;
    uint32_t input_bytes = 0;
    uint32_t output_bytes = 0;
    bool operator==(const Telemetry&) const = default;
};

enum class ResultKind : uint32_t { ack = 0, hidden_state = 1, logits = 2 };
// RESULT status values: 0 done; 1 the WORK failed. Ours sends status 1 with an empty ACK for
// "the worker's state for the session does not match prefix_hash" (recoverable: replay with
// RESET_SESSION) and other errors as an ERROR frame; upstream sends every error as status 1, an
// ACK kind and the message as its payload (result_error_message), its prefix mismatch as
// kUpstreamPrefixMismatch.
inline constexpr uint32_t kStatusOk = 0;
inline constexpr uint32_t kStatusStateMismatch = 1;
inline constexpr const char* kUpstreamPrefixMismatch = "worker KV prefix hash mismatch";

// The answer to a DraftRequest (ours): {version, rows, bits, hidden_bytes*, capture_count*,
// capture_bytes*}, then capture_count u32 layer ids, the hidden rows ([rows][width] values at
// `bits`, or none), the captures ([capture_count][rows][width]). The last hop writes it with its
// own layers; each hop that relays it upstream puts its layers' captures in front. Checked on
// decode: version = kDraftVersion, rows >= 1, bits 32/16/8, at most kMaxDraftCaptures layers,
// strictly ascending, hidden_bytes and capture_bytes whole rows of one width (the same width
// when both are there; the width itself is the receiver's check), and the record is exactly the
// rest of the payload.
struct DraftRows {
    uint32_t rows = 0;
    uint32_t bits = 32;
    std::vector<uint8_t> hidden;
    std::vector<uint32_t> layers;
    std::vector<uint8_t> captured;
    bool operator==(const DraftRows&) const = default;
};
// On the wire a RESULT that carries DraftRows after its payload has this bit set in result_kind.
inline constexpr uint32_t kResultDraftRows = 0x100;

// RESULT (4). telemetry_count = telemetry.size(), telemetry_bytes = 40 * telemetry_count,
// payload_bytes = payload.size(). Checked on decode: kind is 0, 1 or 2; an ACK has no payload
// unless its status is not 0 (then the payload is the error message, upstream's error shape);
// a hidden state has payload_bits 32, 16 or 8 and a whole number of values; logits are 32-bit
// (a multiple of 4 bytes).
struct Result {
    uint64_t request_id = 0;
    uint64_t result_hash = 0;
    uint32_t status = 0;
    ResultKind kind = ResultKind::ack;
    uint32_t payload_bits = 0;
    std::vector<Telemetry> telemetry;
    std::vector<uint8_t> payload;
    std::optional<DraftRows> draft;  // after the payload (result_kind | kResultDraftRows)
    bool operator==(const Result&) const = default;
};

// The error a RESULT reports: "" for status 0; the payload of an error ACK (upstream's shape);
// "state mismatch" for ours (status 1, no payload).
std::string result_error_message(const Result& r);
// Whether r says the worker's session holds another prefix (ours, or upstream's message).
bool result_is_state_mismatch(const Result& r);

// IDENTITY (64, ours): {version, n_layers, arch_len} (version 2: then `features`) + the 16-byte
// metadata hash + the architecture name (<= 127 bytes). Our worker's answer to an IDENTIFY
// probe: what the coordinator checks a worker of ours by (the HELLO's fields are upstream's).
// Version 2 adds the extensions the worker offers; a prober says it reads version 2 by the
// probe's pos0 (kIdentityVersion2), so an older coordinator of ours, whose probe has pos0 0, is
// answered with version 1. Encoded as version 1 when features is 0, else version 2. Checked on
// decode: version 1 or 2 (2 with features != 0), the record is exactly the payload.
inline constexpr uint32_t kIdentityVersion = 1;
inline constexpr uint32_t kIdentityVersion2 = 2;
inline constexpr size_t kIdentityFixedBytes = 3 * 4 + 16;
// IDENTITY features (version 2).
inline constexpr uint32_t kFeatureBatchedWork = 0x1;  // reads WORK flag kWorkBatch
struct Identity {
    uint32_t n_layers = 0;
    std::array<uint8_t, 16> metadata_hash{};
    std::string architecture;
    uint32_t features = 0;
    bool operator==(const Identity&) const = default;
};

// SNAPSHOT_SAVE_REQ (5): exactly the fixed record.
struct SnapshotSaveReq {
    uint32_t model_id = 0;
    uint64_t session_id = 0;
    uint64_t request_id = 0;
    uint64_t token_hash = 0;
    uint32_t token_count = 0;
    uint32_t layer_start = 0;
    uint32_t layer_end = 0;
    bool operator==(const SnapshotSaveReq&) const = default;
};

// SNAPSHOT_BEGIN (6): the SAVE_REQ record plus payload_hi/lo (the size of the shard that the
// CHUNKs will carry), status, token_bytes, message_bytes; then the tokens (i32 big-endian,
// token_bytes = 4 * token_count = 4 * tokens.size()), then the message. The spec names only the
// counts; this order (tokens, then message) is ours.
struct SnapshotBegin {
    SnapshotSaveReq req;
    uint64_t payload_bytes = 0;
    uint32_t status = 0;
    std::vector<int32_t> tokens;
    std::string message;
    bool operator==(const SnapshotBegin&) const = default;
};

// SNAPSHOT_LOAD_BEGIN (9): the coordinator pushes a shard to a worker; the same record as
// SNAPSHOT_BEGIN (the spec gives it no layout of its own).
struct SnapshotLoadBegin : SnapshotBegin {
    bool operator==(const SnapshotLoadBegin&) const = default;
};

// SNAPSHOT_CHUNK (7): request_hi/lo, chunk_bytes, then the data (at most kSnapshotChunkBytes).
struct SnapshotChunk {
    uint64_t request_id = 0;
    std::vector<uint8_t> data;
    bool operator==(const SnapshotChunk&) const = default;
};

// SNAPSHOT_DONE (8): request_hi/lo, status, message_bytes, then the message.
struct SnapshotDone {
    uint64_t request_id = 0;
    uint32_t status = 0;
    std::string message;
    bool operator==(const SnapshotDone&) const = default;
};

// One whole frame: header (12 bytes) + payload. Throws ProtocolError when the value cannot be
// represented (a name, host or data block over its bound, a size over u32, a bad bit width).
std::vector<uint8_t> encode(const Hello& m);
std::vector<uint8_t> encode(const ErrorFrame& m);
std::vector<uint8_t> encode(const Work& m);
std::vector<uint8_t> encode(const Result& m);
std::vector<uint8_t> encode(const SnapshotSaveReq& m);
std::vector<uint8_t> encode(const SnapshotBegin& m);
std::vector<uint8_t> encode(const SnapshotChunk& m);
std::vector<uint8_t> encode(const SnapshotDone& m);
std::vector<uint8_t> encode(const SnapshotLoadBegin& m);
std::vector<uint8_t> encode(const Identity& m);

// Payload decoders: `payload` is what follows the header. Throw ProtocolError.
Hello decode_hello(std::span<const uint8_t> payload);
ErrorFrame decode_error(std::span<const uint8_t> payload);
Work decode_work(std::span<const uint8_t> payload);
Result decode_result(std::span<const uint8_t> payload);
SnapshotSaveReq decode_snapshot_save_req(std::span<const uint8_t> payload);
SnapshotBegin decode_snapshot_begin(std::span<const uint8_t> payload);
SnapshotChunk decode_snapshot_chunk(std::span<const uint8_t> payload);
SnapshotDone decode_snapshot_done(std::span<const uint8_t> payload);
SnapshotLoadBegin decode_snapshot_load_begin(std::span<const uint8_t> payload);
Identity decode_identity(std::span<const uint8_t> payload);

// The route blob alone (WORK's last part): `count` entries, then an optional return record.
std::vector<uint8_t> encode_route(const std::vector<RouteEntry>& route, const std::optional<RouteReturn>& ret);
void decode_route(std::span<const uint8_t> blob, uint32_t count, std::vector<RouteEntry>& route,
                  std::optional<RouteReturn>& ret);

// A complete frame as FrameReader hands it out: the type is known, the payload size was within
// bounds and at least the type's fixed record.
struct Frame {
    FrameType type = FrameType::error;
    std::vector<uint8_t> payload;
};

using Message = std::variant<Hello, ErrorFrame, Work, Result, SnapshotSaveReq, SnapshotBegin, SnapshotChunk,
                             SnapshotDone, SnapshotLoadBegin, Identity>;
// decode_<type>(frame.payload) by frame.type.
Message decode(const Frame& frame);

// Reads the 12 header bytes: checks the magic, the type (1..9 or 64), the payload size against
// max_payload and against the type's fixed record. Returns {type, payload bytes}.
struct FrameHeader {
    FrameType type;
    uint32_t bytes;
};
FrameHeader decode_header(std::span<const uint8_t, kHeaderBytes> header, uint32_t max_payload);

// Splits a byte stream into frames as the bytes arrive, in pieces of any size. A frame's
// payload is buffered only after its header passed decode_header, and grows with the bytes
// actually received, never to the declared size up front. A partial frame yields nothing and
// no error. After a ProtocolError the stream is out of step: every later feed() throws too, and
// frames the failing call had completed before the bad header are dropped with it (the
// connection is to be closed anyway).
class FrameReader {
public:
    explicit FrameReader(uint32_t max_payload = kDefaultMaxPayload) : max_payload_(max_payload) {}

    // The frames completed by these bytes, in order.
    std::vector<Frame> feed(std::span<const uint8_t> bytes);
    // Bytes held of the frame in progress (header and payload).
    size_t pending() const { return header_have_ + payload_.size(); }
    uint32_t max_payload() const { return max_payload_; }

private:
    uint32_t max_payload_;
    uint8_t header_[kHeaderBytes] = {};
    size_t header_have_ = 0;
    bool in_payload_ = false;
    FrameHeader current_{FrameType::error, 0};
    std::vector<uint8_t> payload_;
    bool failed_ = false;
};

// The rolling token-prefix hash: FNV-1a-64 over each token's 4 little-endian bytes, continuing
// from `prev` (kTokenHashInit for an empty transcript).
inline constexpr uint64_t kTokenHashInit = 1469598103934665603ull;
inline constexpr uint64_t kTokenHashPrime = 1099511628211ull;
uint64_t token_hash(uint64_t prev, std::span<const int32_t> tokens);

}  // namespace ds4::dist
