// ds4-eval's split-screen terminal UI (docs/EVAL.md, "Terminal UI"): the cases and their states
// on the left, the running case's reply streaming on the right (reasoning dimmed), a status
// line at the bottom. The run happens on the main thread, which also draws; a reader thread
// only queues keys, which the main thread takes (keys()) while it generates and between cases.
// The alternate screen is left, and the terminal restored, on destruction and on a fatal signal.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "eval/cases.h"
#include "eval/runner.h"

namespace ds4::eval_cli {

enum class Key { Up, Down, Enter, Pause, Quit };

class Tui {
public:
    Tui(const std::vector<eval::Case>& cases, std::string title);
    ~Tui();
    Tui(const Tui&) = delete;
    Tui& operator=(const Tui&) = delete;

    // The keys pressed since the last call (Ctrl+C counts as Quit).
    std::vector<Key> keys();
    int selected() const { return selected_; }
    void move_selection(int delta);

    void set_status(size_t i, eval::Status s, const std::string& picked = "");
    void begin_case(size_t i);
    void stream(std::string_view text, bool reasoning);
    void set_phase(std::string phase);  // the status line's right part
    void set_paused(bool p) { paused_ = p; }
    void set_queued(int i) { queued_ = i; }
    // Draws now, or only when the last draw is older than 50 ms (throttled: while streaming).
    void draw(bool throttled = false);

private:
    void reader();
    void draw_left(int rows, int width);
    void draw_right(int rows, int col, int width);

    const std::vector<eval::Case>& cases_;
    std::string title_;
    std::vector<eval::Status> status_;
    std::vector<std::string> picked_;
    int selected_ = 0, running_ = -1, queued_ = -1;
    bool paused_ = false;
    std::string phase_;
    std::string text_;       // the running case's reply
    std::vector<bool> dim_;  // per byte of text_: reasoning
    long long last_draw_ms_ = 0;

    std::mutex m_;
    std::deque<Key> keys_;
    std::atomic<bool> stop_{false};
    std::thread reader_;
};

}  // namespace ds4::eval_cli
