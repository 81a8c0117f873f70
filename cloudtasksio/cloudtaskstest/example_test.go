package cloudtaskstest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A test starts a server, points the ordinary client at it, and inspects what
// was stored.
func Example() {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	defer srv.Close()

	ctx := context.Background()
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	queue := "projects/my-project/locations/us-central1/queues/orders"
	if _, err := srv.CreateQueue(queue); err != nil {
		panic(err)
	}
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{
		Parent: queue,
		Task: &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url:  "https://orders.example.com/process",
			Body: []byte(`{"order":1}`),
		}}},
	})
	if err != nil {
		panic(err)
	}
	for _, task := range srv.Tasks(queue) {
		req := task.GetHttpRequest()
		fmt.Println(req.GetHttpMethod(), req.GetUrl(), string(req.GetBody()))
	}
	// Output: POST https://orders.example.com/process {"order":1}
}

// Fault injection scripts the answers a client gets, to exercise its retries.
func ExampleServer_InjectErrors() {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	defer srv.Close()
	ctx := context.Background()
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	queue := "projects/my-project/locations/us-central1/queues/orders"
	if _, err := srv.CreateQueue(queue); err != nil {
		panic(err)
	}

	srv.InjectErrors("CreateTask", codes.Unavailable, codes.ResourceExhausted)
	srv.LoseResponses(1)
	req := &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		Name: queue + "/tasks/order-1",
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: "https://orders.example.com/process",
		}},
	}}
	for range 4 {
		_, err := client.CreateTask(ctx, req)
		fmt.Println(status.Code(err))
	}
	st := srv.Stats()
	fmt.Println("calls:", st.CreateTaskCalls, "stored:", st.TasksCreated, "lost:", st.LostResponses)
	// Output:
	// Unavailable
	// ResourceExhausted
	// Unavailable
	// AlreadyExists
	// calls: 4 stored: 1 lost: 1
}

// A running queue dispatches its tasks to their targets, with the headers
// Cloud Tasks adds.
func Example_dispatch() {
	received := make(chan string, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		received <- fmt.Sprintf("%s %s %s queue=%s task=%s", r.Method, r.URL.Path, body,
			r.Header.Get("X-CloudTasks-QueueName"), r.Header.Get("X-CloudTasks-TaskName"))
	}))
	defer target.Close()

	srv := cloudtaskstest.NewServer()
	defer srv.Close()
	ctx := context.Background()
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	queue := "projects/my-project/locations/us-central1/queues/orders"
	if _, err := srv.CreateQueue(queue); err != nil {
		panic(err)
	}
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		Name: queue + "/tasks/order-1",
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: target.URL + "/process", Body: []byte(`{"order":1}`),
		}},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-received)
	// Output: POST /process {"order":1} queue=orders task=order-1
}

// Wait returns once every due task has been dispatched, so a test needs no
// polling loop.
func ExampleServer_Wait() {
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer target.Close()
	srv := cloudtaskstest.NewServer()
	defer srv.Close()
	ctx := context.Background()
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	queue := "projects/my-project/locations/us-central1/queues/orders"
	if _, err := srv.CreateQueue(queue); err != nil {
		panic(err)
	}
	for range 3 {
		task := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: target.URL}}}
		if _, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: task}); err != nil {
			panic(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := srv.Wait(ctx); err != nil {
		panic(err)
	}
	fmt.Println("delivered:", srv.Stats().TasksSucceeded, "stored:", len(srv.Tasks(queue)))
	// Output: delivered: 3 stored: 0
}
