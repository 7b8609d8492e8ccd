// Upstream ds4 on the wire (docs/DISTRIBUTED.md, "Mixed clusters"; issue 38): the frames its
// worker sent (tests/data/upstream-frames, captured from upstream b0309611's CPU build) decode
// as what they held, and our coordinator registers that worker from its HELLO: it probes it,
// reads the error RESULT upstream answers the probe with, and marks the hop as upstream's. A
// HELLO of another variant or layer count is refused.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "dist/connection.h"
#include "dist/protocol.h"
#include "pipeline/coordinator.h"

namespace ds4 {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes fixture(const std::string& name) {
    std::ifstream f(std::string(DS4_TEST_DATA) + "/upstream-frames/" + name, std::ios::binary);
    EXPECT_TRUE(f.good()) << name;
    return Bytes(std::istreambuf_iterator<char>(f), {});
}

dist::Frame one_frame(const Bytes& b) {
    dist::FrameReader r;
    auto frames = r.feed(b);
    EXPECT_EQ(frames.size(), 1u);
    EXPECT_EQ(r.pending(), 0u);
    return frames.empty() ? dist::Frame{} : frames[0];
}

// Big-endian u32 field i of a frame's payload.
void patch(Bytes& b, size_t field, uint32_t v) {
    const size_t at = dist::kHeaderBytes + 4 * field;
    b[at] = uint8_t(v >> 24), b[at + 1] = uint8_t(v >> 16), b[at + 2] = uint8_t(v >> 8), b[at + 3] = uint8_t(v);
}

TEST(DistUpstream, WorkerHelloDecodesAsCaptured) {
    const dist::Frame f = one_frame(fixture("hello-worker-flash-q2-layers21-output.bin"));
    ASSERT_EQ(f.type, dist::FrameType::hello);
    const dist::Hello h = dist::decode_hello(f.payload);
    EXPECT_EQ(h.model_id, 0u);  // the variant number: Flash
    EXPECT_EQ(h.quant_bits, 2u);
    EXPECT_EQ(h.layer_start, 21u);
    EXPECT_EQ(h.layer_end, 42u);
    EXPECT_TRUE(h.has_output);
    EXPECT_TRUE(h.has_hidden);
    EXPECT_EQ(h.ctx_size, 64u);
    EXPECT_EQ(h.n_layers, 43u);
    EXPECT_EQ(h.listen_port, 4001u);
    EXPECT_EQ(h.model_name, "DeepSeek V4 Flash");
    // And our encoder writes the same bytes for it.
    EXPECT_EQ(dist::encode(h), fixture("hello-worker-flash-q2-layers21-output.bin"));
}

TEST(DistUpstream, ErrorResultsDecodeWithTheirMessage) {
    struct Case {
        const char* file;
        const char* message;
    };
    for (const Case& c : {Case{"result-error-work-flags-0x13.bin", "invalid distributed WORK flags"},
                          Case{"result-error-no-graph-backend.bin", "layer slices require the graph backend"}}) {
        const dist::Frame f = one_frame(fixture(c.file));
        ASSERT_EQ(f.type, dist::FrameType::result) << c.file;
        const dist::Result r = dist::decode_result(f.payload);
        EXPECT_EQ(r.request_id, 1u);
        EXPECT_EQ(r.status, 1u);
        EXPECT_EQ(r.kind, dist::ResultKind::ack);
        EXPECT_TRUE(r.telemetry.empty());
        EXPECT_EQ(dist::result_error_message(r), c.message);
        EXPECT_FALSE(dist::result_is_state_mismatch(r)) << "an upstream error read as a state mismatch";
        EXPECT_EQ(dist::encode(r), fixture(c.file));
    }
    // Ours: status 1 and no payload is the recoverable mismatch, and so is upstream's message.
    dist::Result mine;
    mine.status = dist::kStatusStateMismatch;
    EXPECT_TRUE(dist::result_is_state_mismatch(dist::decode_result(one_frame(dist::encode(mine)).payload)));
    dist::Result theirs = mine;
    const std::string msg = dist::kUpstreamPrefixMismatch;
    theirs.payload.assign(msg.begin(), msg.end());
    EXPECT_TRUE(dist::result_is_state_mismatch(dist::decode_result(one_frame(dist::encode(theirs)).payload)));
    // A successful ACK still carries nothing.
    Bytes ok = fixture("result-error-work-flags-0x13.bin");
    patch(ok, 4, 0);
    EXPECT_THROW(dist::decode_result(one_frame(ok).payload), dist::ProtocolError);
}

TEST(DistUpstream, IdentityRoundTripsAndItsTypeIsOurs) {
    dist::Identity id{43, {}, "deepseek4"};
    for (size_t i = 0; i < id.metadata_hash.size(); ++i) id.metadata_hash[i] = uint8_t(i * 7 + 1);
    const dist::Frame f = one_frame(dist::encode(id));
    EXPECT_EQ(uint32_t(f.type), 64u);
    EXPECT_EQ(dist::decode_identity(f.payload), id);
    Bytes bad = dist::encode(id);
    patch(bad, 0, 2);
    EXPECT_THROW(dist::decode_identity(one_frame(bad).payload), dist::ProtocolError);
}

model::ModelInfo flash_coordinator() {
    model::ModelInfo info;
    info.architecture = "deepseek4";
    info.n_layer = 43;
    info.hidden_size = 4 * 4096;
    info.n_vocab = 129280;
    info.range = model::LayerRange{0, 20, false};
    info.metadata_hash[0] = 0x5a;
    return info;
}

// A fake upstream worker: sends `hello` on a control connection, answers the probe with the
// captured error RESULT, and returns the probe's flags (0 when none came).
uint32_t fake_upstream_worker(uint16_t port, const Bytes& hello, std::string* refusal) {
    dist::Socket s = dist::connect_to("127.0.0.1", port);
    dist::authenticate_connector(s, dist::DistKey{}, dist::Channel::control);
    dist::Connection c(std::move(s));
    c.send(hello);
    const dist::Message m = c.recv_message(10);
    if (const auto* e = std::get_if<dist::ErrorFrame>(&m)) {
        *refusal = e->message;
        return 0;
    }
    const auto* w = std::get_if<dist::Work>(&m);
    if (!w) return 0;
    c.send(fixture("result-error-work-flags-0x13.bin"));
    const uint32_t flags = w->flags;
    // Upstream's worker keeps its control connection open while it runs.
    try {
        (void)c.recv_message(3);
    } catch (const Error&) {
    }
    return flags;
}

TEST(DistUpstream, OurCoordinatorRegistersUpstreamsWorker) {
    pipeline::Coordinator coord(flash_coordinator(), "127.0.0.1", 0, dist::DistKey{}, false);
    uint32_t probe_flags = 0;
    std::string refusal;
    std::thread peer([&] {
        probe_flags = fake_upstream_worker(coord.port(), fixture("hello-worker-flash-q2-layers21-output.bin"),
                                           &refusal);
    });
    const pipeline::Route r = coord.wait_for_route(10);
    peer.join();
    EXPECT_EQ(probe_flags, dist::kWorkIdentify);
    EXPECT_EQ(refusal, "");
    EXPECT_TRUE(r.upstream);
    ASSERT_EQ(r.hops.size(), 1u);
    EXPECT_EQ(r.hops[0].dialect, pipeline::Dialect::upstream);
    EXPECT_EQ(r.hops[0].entry.layer_start, 21u);
    EXPECT_EQ(r.hops[0].entry.layer_end, 42u);
    EXPECT_EQ(r.hops[0].entry.port, 4001u);
    EXPECT_EQ(r.hops[0].entry.flags, dist::kRouteOutputLogits);
    EXPECT_TRUE(r.worker_head);
}

TEST(DistUpstream, AHelloOfAnotherVariantOrShapeIsRefused) {
    pipeline::Coordinator coord(flash_coordinator(), "127.0.0.1", 0, dist::DistKey{}, false);
    const Bytes hello = fixture("hello-worker-flash-q2-layers21-output.bin");
    Bytes pro = hello;
    patch(pro, 0, 1);  // model_id: the Pro variant
    Bytes short_model = hello;
    patch(short_model, 7, 61);  // n_layers
    for (const Bytes& h : {pro, short_model}) {
        std::string refusal;
        const uint32_t flags = fake_upstream_worker(coord.port(), h, &refusal);
        EXPECT_EQ(flags, 0u) << "probed a worker of another model";
        EXPECT_NE(refusal.find("another model"), std::string::npos) << refusal;
    }
    EXPECT_THROW(coord.route(), Error);
}

TEST(DistUpstream, UpstreamIdentityOfOurModels) {
    model::ModelInfo info = flash_coordinator();
    EXPECT_EQ(pipeline::upstream_model_id(info), 0u);
    EXPECT_EQ(pipeline::upstream_model_name(info), "DeepSeek V4 Flash");
    info.hidden_size = 4 * 7168;
    EXPECT_EQ(pipeline::upstream_model_id(info), 1u);
    EXPECT_EQ(pipeline::upstream_model_name(info), "DeepSeek V4 Pro");
    info.architecture = "glm-dsa";
    EXPECT_EQ(pipeline::upstream_model_id(info), 2u);
    EXPECT_EQ(pipeline::upstream_model_name(info), "GLM 5.2");
}

}  // namespace
}  // namespace ds4
